package apiserver

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/pkg/apiserver/admission"
)

// KubernetesService is the Service in the default namespace through which
// pods reach the API server, as kube-apiserver maintains it.
const KubernetesService = "kubernetes"

// kubernetesService returns the kubernetes Service for a server listening on
// port, with the first address of cidr: kube-apiserver's (port https 443 to
// the server's port, TCP, no session affinity).
func kubernetesService(cidr netip.Prefix, port int32) *corev1.Service {
	ip := admission.FirstServiceIP(cidr).String()
	family := corev1.IPv4Protocol
	if cidr.Addr().Is6() {
		family = corev1.IPv6Protocol
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: KubernetesService, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			IPFamilies: []corev1.IPFamily{family}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
			SessionAffinity: corev1.ServiceAffinityNone, InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyCluster),
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(port)}}},
	}
}

// kubernetesServiceUpdate returns cur with the type and ports of want when
// they differ (as kube-apiserver's reconciler checks them), or nil.
func kubernetesServiceUpdate(cur, want *corev1.Service) *corev1.Service {
	if cur.Spec.Type == want.Spec.Type && equality.Semantic.DeepEqual(cur.Spec.Ports, want.Spec.Ports) {
		return nil
	}
	next := cur.DeepCopy()
	next.Spec.Type, next.Spec.Ports = want.Spec.Type, want.Spec.Ports
	return next
}

// ensureKubernetesService creates the kubernetes Service, or brings its
// ports to the server's, in the store directly: at start, before serving.
func (s *Server) ensureKubernetesService(ctx context.Context) error {
	want := kubernetesService(s.serviceCIDR, s.port)
	if err := s.ensure(ctx, "services", want); err != nil {
		return err
	}
	res, _ := s.reg.Lookup("", "v1", "services")
	key := res.Key(metav1.NamespaceDefault, KubernetesService)
	_, _, err := s.store.Update(ctx, key, func(cur runtime.Object) (runtime.Object, error) {
		if cur == nil {
			return nil, nil
		}
		if next := kubernetesServiceUpdate(cur.(*corev1.Service), want); next != nil {
			return next, nil
		}
		return cur, nil
	})
	if err != nil {
		return fmt.Errorf("update the kubernetes service: %w", err)
	}
	return nil
}

// syncKubernetesService re-creates the kubernetes Service when it is gone
// and repairs its ports, through the API.
func (c *controller) syncKubernetesService(ctx context.Context) error {
	want := kubernetesService(c.s.serviceCIDR, c.s.port)
	svcs := c.client.CoreV1().Services(metav1.NamespaceDefault)
	o, ok := c.s.store.Get("services/" + metav1.NamespaceDefault + "/" + KubernetesService)
	if !ok {
		_, err := svcs.Create(ctx, want, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the kubernetes service: %w", err)
		}
		return nil
	}
	obj, err := c.s.store.Decode(o)
	if err != nil {
		return fmt.Errorf("decode the kubernetes service: %w", err)
	}
	next := kubernetesServiceUpdate(obj.(*corev1.Service), want)
	if next == nil {
		return nil
	}
	if _, err := svcs.Update(ctx, next, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("update the kubernetes service: %w", err)
	}
	return nil
}
