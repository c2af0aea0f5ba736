package apiserver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// PersistentVolumes and claims are served, listed and watched like the other kinds, with kube-apiserver's
// defaults; the binding loop binds a Pending claim to a volume that fits, as kube-controller-manager does.
func TestPersistentVolumeBinding(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	pvs, pvcs := ts.client.CoreV1().PersistentVolumes(), ts.client.CoreV1().PersistentVolumeClaims("default")
	w, err := pvcs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, pv := range []*corev1.PersistentVolume{testPV("small", "100Mi", "", nil), testPV("fit", "1Gi", "", nil),
		testPV("big", "10Gi", "", nil)} {
		pv.Status = corev1.PersistentVolumeStatus{}
		created, err := pvs.Create(ctx, pv, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if created.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain ||
			*created.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
			t.Errorf("defaults %+v", created.Spec)
		}
	}
	eventually(t, "volumes Available", func() bool {
		l, err := pvs.List(ctx, metav1.ListOptions{})
		for _, pv := range l.Items {
			if pv.Status.Phase != corev1.VolumeAvailable {
				return false
			}
		}
		return err == nil && len(l.Items) == 3
	})
	c := testPVC("data", "500Mi", nil)
	c.UID, c.Status = "", corev1.PersistentVolumeClaimStatus{}
	if _, err := pvcs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.PersistentVolumeClaim
	eventually(t, "the claim bound", func() bool {
		got, err = pvcs.Get(ctx, "data", metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound
	})
	size := got.Status.Capacity[corev1.ResourceStorage]
	if got.Spec.VolumeName != "fit" || size.Cmp(resource.MustParse("1Gi")) != 0 || len(got.Status.AccessModes) != 2 ||
		got.Annotations["pv.kubernetes.io/bind-completed"] != "yes" || got.Annotations["pv.kubernetes.io/bound-by-controller"] != "yes" {
		t.Errorf("claim %+v", got)
	}
	var pv *corev1.PersistentVolume
	eventually(t, "the volume Bound", func() bool {
		pv, err = pvs.Get(ctx, "fit", metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeBound
	})
	if r := pv.Spec.ClaimRef; r == nil || r.Name != "data" || r.Namespace != "default" || r.UID != got.UID {
		t.Errorf("claimRef %+v", pv.Spec.ClaimRef)
	}
	// The watch saw the claim added and bound.
	deadline := time.After(10 * time.Second)
	for bound := false; !bound; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Modified && ev.Object.(*corev1.PersistentVolumeClaim).Status.Phase == corev1.ClaimBound {
				bound = true
			}
		case <-deadline:
			t.Fatal("no watch event of the binding")
		}
	}

	// A claim nothing fits stays Pending.
	big := testPVC("huge", "1Ti", nil)
	big.UID, big.Status = "", corev1.PersistentVolumeClaimStatus{}
	if _, err := pvcs.Create(ctx, big, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	if c, _ := pvcs.Get(ctx, "huge", metav1.GetOptions{}); c.Status.Phase != corev1.ClaimPending {
		t.Errorf("huge claim %s", c.Status.Phase)
	}

	// A node reads its pod's claim and the volume bound to it, and nothing else.
	if _, err := ts.client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := testPod("db")
	p.Spec.NodeName = "n1"
	p.Spec.Volumes = []corev1.Volume{{Name: "d", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	if _, err := ts.client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := nodeClient(t, ts, "n1")
	if _, err := node.CoreV1().PersistentVolumeClaims("default").Get(ctx, "data", metav1.GetOptions{}); err != nil {
		t.Errorf("node gets its pod's claim: %v", err)
	}
	if _, err := node.CoreV1().PersistentVolumes().Get(ctx, "fit", metav1.GetOptions{}); err != nil {
		t.Errorf("node gets its pod's volume: %v", err)
	}
	if _, err := node.CoreV1().PersistentVolumeClaims("default").Get(ctx, "huge", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node gets another claim: %v", err)
	}
	if _, err := node.CoreV1().PersistentVolumes().Get(ctx, "big", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node gets another volume: %v", err)
	}

	// Once its claim is gone, the volume is Released (Retain) and binds nothing more.
	if err := pvcs.Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the volume Released", func() bool {
		pv, err = pvs.Get(ctx, "fit", metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeReleased
	})
}

// kubectl get pv,pvc,svc print upstream's columns.
func TestVolumeAndServiceTables(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	for _, path := range []struct{ path, want string }{
		{"/api/v1/namespaces/default/services", "Cluster-IP"},
		{"/api/v1/persistentvolumes", "Reclaim Policy"},
		{"/api/v1/namespaces/default/persistentvolumeclaims", "Access Modes"},
	} {
		body, err := ts.client.CoreV1().RESTClient().Get().AbsPath(path.path).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil || !strings.Contains(string(body), `"name":"`+path.want+`"`) {
			t.Errorf("%s: %v %s", path.path, err, body)
		}
	}
	body, err := ts.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/namespaces/default/services").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil || !strings.Contains(string(body), `"cells":["kubernetes","ClusterIP","10.96.0.1","\u003cnone\u003e","443/TCP"`) {
		t.Errorf("kubernetes service row: %v %s", err, body)
	}
}

// Services are served with kube-apiserver's defaults and a cluster IP from the service range; the
// kubernetes Service in default points at the server and is kept.
func TestServices(t *testing.T) {
	t.Parallel()
	ts := startServer(t, "")
	ctx := ctxT(t)
	svcs := ts.client.CoreV1().Services("default")
	k, err := svcs.Get(ctx, KubernetesService, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	port := ts.URL()[strings.LastIndex(ts.URL(), ":")+1:]
	if k.Spec.ClusterIP != "10.96.0.1" || len(k.Spec.Ports) != 1 || k.Spec.Ports[0].Port != 443 ||
		k.Spec.Ports[0].Name != "https" || k.Spec.Ports[0].TargetPort.String() != port || k.Labels["provider"] != "kubernetes" {
		t.Errorf("kubernetes service %+v", k)
	}
	web, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(web.Spec.ClusterIP, "10.") || web.Spec.ClusterIPs[0] != web.Spec.ClusterIP || web.Spec.Type != corev1.ServiceTypeClusterIP ||
		web.Spec.Ports[0].Protocol != corev1.ProtocolTCP || web.Spec.Ports[0].TargetPort.IntValue() != 80 {
		t.Errorf("web %+v", web.Spec)
	}
	if _, err := svcs.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "copy"}, Spec: corev1.ServiceSpec{
		ClusterIP: web.Spec.ClusterIP, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("a taken cluster IP: %v", err)
	}
	// Many at once get distinct addresses.
	ips := map[string]bool{web.Spec.ClusterIP: true, "10.96.0.1": true}
	errs := make(chan error, 10)
	got := make(chan string, 10)
	for i := 0; i < 10; i++ {
		go func(i int) {
			s, err := svcs.Create(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s" + strconv.Itoa(i)},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: []corev1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
			if err != nil {
				errs <- err
				return
			}
			got <- s.Spec.ClusterIP + " " + strconv.Itoa(int(s.Spec.Ports[0].NodePort))
		}(i)
	}
	nodePorts := map[string]bool{}
	for i := 0; i < 10; i++ {
		select {
		case err := <-errs:
			t.Fatal(err)
		case s := <-got:
			ip, np, _ := strings.Cut(s, " ")
			if ips[ip] || nodePorts[np] || np == "0" {
				t.Errorf("reused %s", s)
			}
			ips[ip], nodePorts[np] = true, true
		}
	}
	// An update without the cluster IP keeps it; the kubernetes Service comes back when deleted.
	upd := web.DeepCopy()
	upd.Spec.ClusterIP, upd.Spec.ClusterIPs = "", nil
	upd.Labels = map[string]string{"tier": "front"}
	if after, err := svcs.Update(ctx, upd, metav1.UpdateOptions{}); err != nil || after.Spec.ClusterIP != web.Spec.ClusterIP {
		t.Errorf("update: %v %+v", err, after)
	}
	if err := svcs.Delete(ctx, KubernetesService, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the kubernetes service back", func() bool {
		k, err := svcs.Get(ctx, KubernetesService, metav1.GetOptions{})
		return err == nil && k.Spec.ClusterIP == "10.96.0.1"
	})
}
