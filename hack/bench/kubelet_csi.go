package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/nodeagent/kubelet/test/csidriver"
)

// startBenchCSIDriver serves the project's test CSI driver in this process, its sockets where a node plugin's
// pod puts them (<root>/plugins/<driver>/csi.sock, and the registrar's in <root>/plugins_registry), so the
// kubelet registers it as it registers any driver. Its volumes are directories under <root>/bench-csi.
func startBenchCSIDriver(ctx context.Context, rootDir string) (func(), error) {
	d, err := csidriver.New(csidriver.Config{NodeID: benchNode, DriverName: csidriver.DefaultDriverName,
		StateDir: filepath.Join(rootDir, "bench-csi")})
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(rootDir, "plugins", d.Name(), "csi.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return nil, err
	}
	ln, err := csidriver.ListenUnix(sock)
	if err != nil {
		return nil, err
	}
	regDir := filepath.Join(rootDir, "plugins_registry")
	if err := os.MkdirAll(regDir, 0o750); err != nil {
		return nil, err
	}
	regSock := csidriver.RegistrationSocketPath(regDir, d.Name())
	regLn, err := csidriver.ListenUnix(regSock)
	if err != nil {
		ln.Close()
		return nil, err
	}
	sctx, cancel := context.WithCancel(ctx)
	go func() { _ = d.Serve(sctx, ln) }()
	go func() { _ = csidriver.NewRegistrar(d.Name(), sock).Serve(sctx, regLn) }()
	return func() {
		cancel()
		_ = csidriver.RemoveSocket(regSock)
		_ = csidriver.RemoveSocket(sock)
	}, nil
}

// runCSI measures 30 pods at once each with its own CSI volume (a static PersistentVolume of the test
// driver, staged and published by it) beside 30 pods each with an emptyDir, alternating which goes first,
// for b.rounds rounds: a CSI volume's cost on the way to Ready (the claim and volume reads, the driver's
// CSIDriver, two driver calls, the records on disk) is the difference of the two p99s. The kubelet's CPU
// per burst is printed beside each.
func (b *kubeletBench) runCSI(ctx context.Context, rootDir string) error {
	stop, err := startBenchCSIDriver(ctx, rootDir)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := b.client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: csidriver.DefaultDriverName},
		Spec: storagev1.CSIDriverSpec{AttachRequired: ptr.To(false)}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := waitFor(ctx, time.Minute, "the node's CSINode listing the bench driver", func() bool {
		cn, err := b.client.StorageV1().CSINodes().Get(ctx, benchNode, metav1.GetOptions{})
		return err == nil && len(cn.Spec.Drivers) == 1
	}); err != nil {
		return err
	}
	var empty, vols []time.Duration
	defer func() { b.mutate = nil }()
	for round := 1; round <= b.rounds; round++ {
		order := []bool{false, true}
		if round%2 == 0 {
			order = []bool{true, false}
		}
		for _, withCSI := range order {
			kind := "emptydir"
			if withCSI {
				kind = "csi"
			}
			pods := names(fmt.Sprintf("%s%d", kind, round), 30)
			if withCSI {
				if err := b.createCSIClaims(ctx, pods); err != nil {
					return err
				}
			}
			b.mutate = func(p *corev1.Pod) {
				src := corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}
				if withCSI {
					src = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c-" + p.Name}}
				}
				p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: src})
				p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
			}
			label := fmt.Sprintf("kubelet_burst30_%s_round%d", kind, round)
			progress("kubelet: 30 pods at once, %s, round %d", kind, round)
			p99, err := b.burstP99(ctx, label, pods)
			if err != nil {
				return err
			}
			if withCSI {
				vols = append(vols, p99)
			} else {
				empty = append(empty, p99)
			}
			if _, err := b.deleteGone(ctx, label+"_delete", pods); err != nil {
				return err
			}
			if withCSI {
				b.deleteCSIClaims(ctx, pods)
			}
		}
	}
	me, mc := median(empty), median(vols)
	figure("kubelet_burst30_emptydir_p99_median", ms(me), "ms")
	figure("kubelet_burst30_csi_p99_median", ms(mc), "ms")
	figure("kubelet_burst30_csi_over_emptydir_p99", 100*(float64(mc)-float64(me))/float64(me), "%")
	return nil
}

// createCSIClaims makes, for each pod, a static PersistentVolume of the test driver and the claim c-<pod>
// bound to it, and waits until every claim is bound (before the burst, which it does not count).
func (b *kubeletBench) createCSIClaims(ctx context.Context, pods []string) error {
	size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	class := "bench-csi"
	for _, p := range pods {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + p}, Spec: corev1.PersistentVolumeSpec{
			Capacity: size, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: class,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "default", Name: "c-" + p},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: csidriver.DefaultDriverName,
				VolumeHandle: "bench-" + p}}}}
		if _, err := b.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return err
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-" + p}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: pv.Spec.AccessModes, StorageClassName: &class, VolumeName: pv.Name,
			Resources: corev1.VolumeResourceRequirements{Requests: size}}}
		if _, err := b.client.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return waitFor(ctx, time.Minute, "the bench claims bound", func() bool {
		for _, p := range pods {
			c, err := b.client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "c-"+p, metav1.GetOptions{})
			if err != nil || c.Status.Phase != corev1.ClaimBound {
				return false
			}
		}
		return true
	})
}

func (b *kubeletBench) deleteCSIClaims(ctx context.Context, pods []string) {
	for _, p := range pods {
		_ = b.client.CoreV1().PersistentVolumeClaims("default").Delete(ctx, "c-"+p, metav1.DeleteOptions{})
		_ = b.client.CoreV1().PersistentVolumes().Delete(ctx, "pv-"+p, metav1.DeleteOptions{})
	}
}
