package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	testclock "k8s.io/utils/clock/testing"
)

// fakeMounter records tmpfs mounts and binds instead of making them.
type fakeMounter struct {
	mu     sync.Mutex
	tmpfs  map[string]int64
	binds  map[string]string
	points map[string]bool
}

func newFakeMounter() *fakeMounter {
	return &fakeMounter{tmpfs: map[string]int64{}, binds: map[string]string{}, points: map[string]bool{}}
}

func (f *fakeMounter) MountTmpfs(dir string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tmpfs[dir], f.points[dir] = size, true
	return nil
}

func (f *fakeMounter) Bind(source, target string, _ bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.binds[target], f.points[target] = source, true
	return nil
}

func (f *fakeMounter) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.points, dir)
	return nil
}

func (f *fakeMounter) IsMountPoint(dir string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.points[dir]
}

// fakeAPI serves objects from maps and counts reads; tokens expire after the asked lifetime.
type fakeAPI struct {
	mu         sync.Mutex
	clock      *testclock.FakeClock
	configMaps map[string]*v1.ConfigMap
	secrets    map[string]*v1.Secret
	claims     map[string]*v1.PersistentVolumeClaim
	pvs        map[string]*v1.PersistentVolume
	reads      map[string]int
	tokens     int
	tokenErr   error
	hold       chan struct{} // when set, a configMap read waits for it to close
}

func newFakeAPI(clk *testclock.FakeClock) *fakeAPI {
	return &fakeAPI{clock: clk, configMaps: map[string]*v1.ConfigMap{}, secrets: map[string]*v1.Secret{},
		claims: map[string]*v1.PersistentVolumeClaim{}, pvs: map[string]*v1.PersistentVolume{}, reads: map[string]int{}}
}

func notFound(kind, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, name)
}

func (a *fakeAPI) ConfigMap(_ context.Context, _, name string) (*v1.ConfigMap, error) {
	a.mu.Lock()
	a.reads["configmap/"+name]++
	hold := a.hold
	a.mu.Unlock()
	if hold != nil {
		<-hold
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if cm, ok := a.configMaps[name]; ok {
		return cm.DeepCopy(), nil
	}
	return nil, notFound("configmaps", name)
}

func (a *fakeAPI) Secret(_ context.Context, _, name string) (*v1.Secret, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reads["secret/"+name]++
	if s, ok := a.secrets[name]; ok {
		return s.DeepCopy(), nil
	}
	return nil, notFound("secrets", name)
}

func (a *fakeAPI) ServiceAccountToken(_ context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tokenErr != nil {
		return nil, a.tokenErr
	}
	a.tokens++
	out := req.DeepCopy()
	out.Status.Token = strings.Join([]string{ns, name, string(req.Spec.BoundObjectRef.UID), strings.Join(req.Spec.Audiences, ","), time.Duration(a.tokens).String()}, "/")
	out.Status.ExpirationTimestamp = metav1.NewTime(a.clock.Now().Add(time.Duration(*req.Spec.ExpirationSeconds) * time.Second))
	return out, nil
}

func (a *fakeAPI) PersistentVolumeClaim(_ context.Context, _, name string) (*v1.PersistentVolumeClaim, error) {
	if c, ok := a.claims[name]; ok {
		return c, nil
	}
	return nil, notFound("persistentvolumeclaims", name)
}

func (a *fakeAPI) PersistentVolume(_ context.Context, name string) (*v1.PersistentVolume, error) {
	if pv, ok := a.pvs[name]; ok {
		return pv, nil
	}
	return nil, notFound("persistentvolumes", name)
}

type fixture struct {
	m     *Manager
	api   *fakeAPI
	mnt   *fakeMounter
	clock *testclock.FakeClock
	root  string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	clk := testclock.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := &fixture{api: newFakeAPI(clk), mnt: newFakeMounter(), clock: clk, root: t.TempDir()}
	m, err := New(Config{RootDir: f.root, API: f.api, Clock: clk, Mounter: f.mnt, Node: func() NodeInfo {
		return NodeInfo{Name: "node1", Allocatable: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

func podWith(vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec:       v1.PodSpec{Volumes: vols, Containers: []v1.Container{{Name: "app"}}},
	}
}

func fileOf(t *testing.T, dir, p string) (string, os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

func int32p(v int32) *int32 { return &v }
func boolp(v bool) *bool    { return &v }

func TestEmptyDir(t *testing.T) {
	f := newFixture(t)
	pod := podWith(
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
	)
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(f.root, "pods/uid-1/volumes/kubernetes.io~empty-dir/scratch")
	if got["scratch"].Path != want {
		t.Fatalf("path %q, want %q", got["scratch"].Path, want)
	}
	if fi, err := os.Stat(want); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("emptyDir mode: %v %v", fi, err)
	}
	if size, ok := f.mnt.tmpfs[got["mem"].Path]; !ok || size != 8<<30 {
		t.Fatalf("memory emptyDir: tmpfs %v size %d, want the node's allocatable", ok, size)
	}
	if _, err := f.m.MountPod(context.Background(), podWith(v1.Volume{Name: "huge", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}})); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("hugepages: %v", err)
	}
}

// Upstream's sizing of memory-backed volumes (empty_dir_test.go TestCalculateEmptyDirMemorySize).
func TestMemoryVolumeSize(t *testing.T) {
	q := resource.MustParse
	alloc := v1.ResourceList{v1.ResourceMemory: q("10Gi")}
	limited := func(limits ...string) *v1.Pod {
		p := podWith()
		p.Spec.Containers = nil
		for _, l := range limits {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q(l)}}})
		}
		return p
	}
	size := func(s string) *resource.Quantity { v := q(s); return &v }
	tests := []struct {
		name  string
		pod   *v1.Pod
		limit *resource.Quantity
		want  int64
	}{
		{"no limits: allocatable", podWith(), nil, 10 << 30},
		{"pod limit smaller", limited("1Gi", "2Gi"), nil, 3 << 30},
		{"pod limit larger than allocatable", limited("20Gi"), nil, 10 << 30},
		{"sizeLimit smaller", limited("3Gi"), size("512Mi"), 512 << 20},
		{"sizeLimit larger than the pod limit", limited("1Gi"), size("2Gi"), 1 << 30},
		{"one container without a limit", func() *v1.Pod {
			p := limited("1Gi")
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{})
			return p
		}(), nil, 10 << 30},
	}
	for _, tt := range tests {
		if got := memoryVolumeSize(tt.pod, tt.limit, alloc); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

func TestConfigMapAndSecret(t *testing.T) {
	f := newFixture(t)
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}
	f.api.secrets["creds"] = &v1.Secret{Data: map[string][]byte{"token": []byte("s3cret")}}
	pod := podWith(
		v1.Volume{Name: "all", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "items", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, DefaultMode: int32p(0o400),
			Items: []v1.KeyToPath{{Key: "a", Path: "dir/a.txt", Mode: int32p(0o600)}, {Key: "b", Path: "b.txt"}}}}},
		v1.Volume{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds", DefaultMode: int32p(0o440)}}},
		v1.Volume{Name: "optional", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope", Optional: boolp(true)}}},
	)
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	all := got["all"].Path
	if !strings.HasSuffix(all, "volumes/kubernetes.io~configmap/all") {
		t.Fatalf("configMap path %q", all)
	}
	if c, m := fileOf(t, all, "a"); c != "1" || m != 0o644 {
		t.Errorf("a: %q %v", c, m)
	}
	if c, _ := fileOf(t, all, "bin"); c != "\x00\x01" {
		t.Errorf("bin: %q", c)
	}
	if c, m := fileOf(t, got["items"].Path, "dir/a.txt"); c != "1" || m != 0o600 {
		t.Errorf("item a: %q %v", c, m)
	}
	if c, m := fileOf(t, got["items"].Path, "b.txt"); c != "2" || m != 0o400 {
		t.Errorf("item b: %q %v", c, m)
	}
	if _, err := os.Stat(filepath.Join(got["items"].Path, "bin")); err == nil {
		t.Error("a key not in items was projected")
	}
	sec := got["secret"].Path
	if c, m := fileOf(t, sec, "token"); c != "s3cret" || m != 0o440 {
		t.Errorf("secret: %q %v", c, m)
	}
	if _, ok := f.mnt.tmpfs[sec]; !ok {
		t.Error("the secret volume is not on a tmpfs")
	}
	if _, ok := f.mnt.tmpfs[all]; ok {
		t.Error("the configMap volume is on a tmpfs")
	}
	if entries, _ := os.ReadDir(got["optional"].Path); len(entries) != 2 { // ..data and its empty set
		t.Errorf("an optional missing secret projected %d entries", len(entries))
	}

	// A change of the configMap shows in the volume at the next sync.
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "one", "b": "2"}}
	if _, err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if c, _ := fileOf(t, all, "a"); c != "one" {
		t.Errorf("after the update: %q", c)
	}
	if _, err := os.Stat(filepath.Join(all, "bin")); err == nil {
		t.Error("a key the update dropped is still there")
	}
}

func TestImmutableIsReadOnce(t *testing.T) {
	f := newFixture(t)
	f.api.configMaps["frozen"] = &v1.ConfigMap{Immutable: boolp(true), Data: map[string]string{"k": "v"}}
	pod := podWith(v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "frozen"}}}})
	for i := 0; i < 3; i++ {
		if _, err := f.m.MountPod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.api.reads["configmap/frozen"]; n != 1 {
		t.Fatalf("an immutable configMap was read %d times", n)
	}
}

// A configMap read for a pod serves its syncs for Config.Reuse, then is read again; a missing one is read at
// every sync until it exists.
func TestObjectsReusedForAWhile(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.Reuse = 30 * time.Second
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"k": "v1"}}
	pod := podWith(
		v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "later", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "later"}}})
	mount := func() map[string]Mounted {
		got, _ := f.m.MountPod(context.Background(), pod)
		return got
	}
	for i := 0; i < 3; i++ {
		mount()
		f.clock.Step(5 * time.Second)
	}
	if n := f.api.reads["configmap/cfg"]; n != 1 {
		t.Errorf("read %d times within the reuse period, want 1", n)
	}
	if n := f.api.reads["secret/later"]; n != 3 {
		t.Errorf("a missing secret was read %d times in 3 syncs, want 3", n)
	}
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"k": "v2"}}
	f.clock.Step(15 * time.Second) // 30 s after the read
	got := mount()
	if c, _ := fileOf(t, got["c"].Path, "k"); c != "v2" || f.api.reads["configmap/cfg"] != 2 {
		t.Errorf("after the reuse period: %q, %d reads", c, f.api.reads["configmap/cfg"])
	}
	// Another pod of the namespace shares the read; one of another namespace reads its own.
	other := pod.DeepCopy()
	other.UID = "uid-2"
	mount2 := func(p *v1.Pod) { _, _ = f.m.MountPod(context.Background(), p) }
	mount2(other)
	if n := f.api.reads["configmap/cfg"]; n != 2 {
		t.Errorf("a second pod of the namespace read the configMap again: %d reads", n)
	}
	elsewhere := pod.DeepCopy()
	elsewhere.UID, elsewhere.Namespace = "uid-3", "other"
	mount2(elsewhere)
	if n := f.api.reads["configmap/cfg"]; n != 3 {
		t.Errorf("a pod of another namespace used this namespace's read: %d reads", n)
	}
}

// A burst of a namespace's pods that all miss the reuse cache reads the object once, not once per pod.
func TestObjectReadSharedByABurst(t *testing.T) {
	f := newFixture(t)
	f.m.cfg.Reuse = 30 * time.Second
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"k": "v1"}}
	f.api.hold = make(chan struct{})
	const pods = 10
	var wg sync.WaitGroup
	errs := make(chan error, pods)
	for i := 0; i < pods; i++ {
		pod := podWith(v1.Volume{Name: "c", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
			LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}})
		pod.UID = types.UID(fmt.Sprintf("uid-%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := f.m.MountPod(context.Background(), pod)
			if err == nil {
				if c, _ := fileOf(t, got["c"].Path, "k"); c != "v1" {
					err = fmt.Errorf("pod %s sees %q", pod.UID, c)
				}
			}
			errs <- err
		}()
	}
	time.Sleep(200 * time.Millisecond) // the pods reach the read while the first one is held
	close(f.api.hold)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.api.reads["configmap/cfg"]; n != 1 {
		t.Errorf("%d pods at once read the configMap %d times, want 1", pods, n)
	}
}

func TestSetupErrorsNameTheVolume(t *testing.T) {
	f := newFixture(t)
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "1"}}
	bad := podWith(
		v1.Volume{Name: "missing", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "nope"}}}},
		v1.Volume{Name: "nokey", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "zz", Path: "zz"}}}}},
		v1.Volume{Name: "escape", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a", Path: "../../etc/x"}}}}},
		v1.Volume{Name: "abs", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}, Items: []v1.KeyToPath{{Key: "a", Path: "/etc/x"}}}}},
		v1.Volume{Name: "dirtype", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/etc/hostname", Type: func() *v1.HostPathType { t := v1.HostPathDirectory; return &t }()}}},
		v1.Volume{Name: "ok", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "csi", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "x"}}},
		v1.Volume{Name: "nfs", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "s", Path: "/"}}},
	)
	got, err := f.m.MountPod(context.Background(), bad)
	if _, ok := got["ok"]; !ok {
		t.Error("a good volume next to bad ones was not set up")
	}
	for vol, want := range map[string]string{
		"missing": `configmap "nope" not found`,
		"nokey":   "references non-existent key: zz",
		"escape":  "starts with '..'",
		"abs":     "is absolute",
		"dirtype": "is not a directory",
		"csi":     "driver name x not found in the list of registered CSI drivers",
		"nfs":     "volume type nfs is not supported",
	} {
		msg := `MountVolume.SetUp failed for volume "` + vol + `" : `
		if err == nil || !strings.Contains(err.Error(), msg) || !strings.Contains(err.Error(), want) {
			t.Errorf("volume %s: error %v, want %q ... %q", vol, err, msg, want)
		}
	}
	var se *SetupError
	if !errors.As(err, &se) {
		t.Error("errors are not SetupErrors")
	}
	dup := podWith(v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, v1.Volume{Name: "x", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if _, err := f.m.MountPod(context.Background(), dup); err == nil || !strings.Contains(err.Error(), `volume "x" is defined twice`) {
		t.Errorf("duplicate name: %v", err)
	}
	unknown := podWith()
	unknown.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ghost", MountPath: "/g"}}
	if _, err := f.m.MountPod(context.Background(), unknown); err == nil || !strings.Contains(err.Error(), `mounts volume "ghost"`) {
		t.Errorf("unknown volume: %v", err)
	}
}

func TestDownwardAPI(t *testing.T) {
	f := newFixture(t)
	pod := podWith(v1.Volume{Name: "info", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
		{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		{Path: "name", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}},
		{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
	}}}})
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := got["info"].Path
	if c, _ := fileOf(t, dir, "labels"); c != `app="web"` {
		t.Errorf("labels %q", c)
	}
	if c, _ := fileOf(t, dir, "mem"); c != "8192" { // no limit: the node's allocatable
		t.Errorf("mem %q", c)
	}
	pod.Labels["tier"] = "front"
	if _, err := f.m.MountPod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if c, _ := fileOf(t, dir, "labels"); c != "app=\"web\"\ntier=\"front\"" {
		t.Errorf("labels after the change %q", c)
	}
}

// A projected kube-api-access volume as the API server injects it: a token bound to the pod, the cluster's
// CA and the namespace; the token is renewed past 80% of its lifetime, and a failed renewal keeps the valid
// one.
func TestProjectedServiceAccountToken(t *testing.T) {
	f := newFixture(t)
	f.api.configMaps["kube-root-ca.crt"] = &v1.ConfigMap{Data: map[string]string{"ca.crt": "CA"}}
	exp := int64(3607)
	pod := podWith(v1.Volume{Name: "kube-api-access-x", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{
		DefaultMode: int32p(0o644),
		Sources: []v1.VolumeProjection{
			{ServiceAccountToken: &v1.ServiceAccountTokenProjection{ExpirationSeconds: &exp, Path: "token"}},
			{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []v1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
			{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		},
	}}})
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := got["kube-api-access-x"].Path
	tok, m := fileOf(t, dir, "token")
	if !strings.HasPrefix(tok, "ns/default/uid-1//") || m != 0o644 {
		t.Errorf("token %q mode %v: want one of ns's default service account, bound to the pod", tok, m)
	}
	if c, _ := fileOf(t, dir, "ca.crt"); c != "CA" {
		t.Errorf("ca.crt %q", c)
	}
	if c, _ := fileOf(t, dir, "namespace"); c != "ns" {
		t.Errorf("namespace %q", c)
	}
	if _, ok := f.mnt.tmpfs[dir]; !ok {
		t.Error("the projected volume is not on a tmpfs")
	}
	sync := func() string {
		if _, err := f.m.MountPod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		c, _ := fileOf(t, dir, "token")
		return c
	}
	f.clock.Step(time.Duration(float64(exp)*0.7) * time.Second)
	if sync() != tok || f.api.tokens != 1 {
		t.Fatalf("renewed before 80%% of its lifetime (%d requests)", f.api.tokens)
	}
	f.clock.Step(time.Duration(float64(exp)*0.11) * time.Second)
	renewed := sync()
	if renewed == tok || f.api.tokens != 2 {
		t.Fatalf("not renewed past 80%% of its lifetime (%d requests)", f.api.tokens)
	}
	f.clock.Step(time.Duration(float64(exp)*0.85) * time.Second)
	f.api.tokenErr = errors.New("API server away")
	if sync() != renewed {
		t.Fatal("a failed renewal replaced a token that is still valid")
	}
	f.clock.Step(time.Duration(exp) * time.Second)
	if _, err := f.m.MountPod(context.Background(), pod); err == nil {
		t.Fatal("an expired token that cannot be renewed is no error")
	}
}

func TestNeedsRefresh(t *testing.T) {
	iat := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		ttl  time.Duration
		age  time.Duration
		want bool
	}{
		{"fresh", time.Hour, time.Minute, false},
		{"just under 80%", time.Hour, 47 * time.Minute, false},
		{"at 80%", time.Hour, 48 * time.Minute, true},
		{"long-lived, young", 7 * 24 * time.Hour, 23 * time.Hour, false},
		{"long-lived, a day old", 7 * 24 * time.Hour, 24 * time.Hour, true},
	}
	for _, tt := range tests {
		if got := needsRefresh(iat, iat.Add(tt.ttl), iat.Add(tt.age)); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestClaims(t *testing.T) {
	f := newFixture(t)
	hostDir := t.TempDir()
	f.api.claims["data"] = &v1.PersistentVolumeClaim{Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv1"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	f.api.pvs["pv1"] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: "data"}, PersistentVolumeSource: v1.PersistentVolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}}}
	f.api.claims["pending"] = &v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimPending}}
	f.api.claims["nfs"] = &v1.PersistentVolumeClaim{Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv2"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	f.api.pvs["pv2"] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv2"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: "nfs"}, PersistentVolumeSource: v1.PersistentVolumeSource{NFS: &v1.NFSVolumeSource{Server: "x", Path: "/"}}}}
	f.api.claims["local"] = &v1.PersistentVolumeClaim{Spec: v1.PersistentVolumeClaimSpec{VolumeName: "pv3"}, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	f.api.pvs["pv3"] = &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv3"}, Spec: v1.PersistentVolumeSpec{
		ClaimRef: &v1.ObjectReference{Namespace: "ns", Name: "local"}, PersistentVolumeSource: v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: hostDir}}}}
	claim := func(name, vol string, ro bool) v1.Volume {
		return v1.Volume{Name: vol, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: name, ReadOnly: ro}}}
	}
	got, err := f.m.MountPod(context.Background(), podWith(claim("data", "d", true), claim("local", "l", false)))
	if err != nil {
		t.Fatal(err)
	}
	if got["d"].Path != hostDir || !got["d"].ReadOnly {
		t.Errorf("hostPath claim: %+v", got["d"])
	}
	if src := f.mnt.binds[got["l"].Path]; src != hostDir || !strings.Contains(got["l"].Path, "kubernetes.io~local-volume/pv3") {
		t.Errorf("local claim: %+v bound from %q", got["l"], src)
	}
	for claimName, want := range map[string]string{"pending": "is not bound", "nfs": "of type nfs", "ghost": "not found"} {
		if _, err := f.m.MountPod(context.Background(), podWith(claim(claimName, "v", false))); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("claim %s: %v, want %q", claimName, err, want)
		}
	}
}

// Volumes go with the pod: everything below its volumes directory, never the host paths it used.
func TestUnmountPod(t *testing.T) {
	f := newFixture(t)
	hostDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f.api.configMaps["cfg"] = &v1.ConfigMap{Data: map[string]string{"a": "1"}}
	pod := podWith(
		v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir}}},
	)
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	// A link a container left in its emptyDir is removed, not followed.
	if err := os.Symlink(hostDir, filepath.Join(got["scratch"].Path, "link")); err != nil {
		t.Fatal(err)
	}
	if err := f.m.UnmountPod(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(f.root, "pods/uid-1/volumes")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volumes left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "keep")); err != nil {
		t.Errorf("a host file was removed: %v", err)
	}
}

func TestUsage(t *testing.T) {
	f := newFixture(t)
	pod := podWith(v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	got, err := f.m.MountPod(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	dir := got["scratch"].Path
	if err := os.WriteFile(filepath.Join(dir, "a"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "hardlink")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	usage, err := f.m.PodUsage(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	u := usage["scratch"]
	if u.Bytes < 1<<20 || u.Bytes > 1<<20+64<<10 || u.Inodes != 3 { // the dir, the file (once), the link
		t.Errorf("usage %+v, want about 1 MiB in 3 inodes", u)
	}
	if none, err := f.m.PodUsage("no-such-pod"); err != nil || len(none) != 0 {
		t.Errorf("a pod without volumes: %v %v", none, err)
	}
}

func TestPodLogUsage(t *testing.T) {
	root := t.TempDir()
	dir := PodLogDir(root, "ns", "web", "uid-1")
	if err := os.MkdirAll(filepath.Join(dir, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "0.log.20261124-010203"} {
		if err := os.WriteFile(filepath.Join(dir, "app", f), make([]byte, 256<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := PodLogUsage(root, "ns", "web", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	if u.Bytes < 512<<10 || u.Inodes != 4 { // two dirs, two files
		t.Errorf("log usage %+v, want at least 512 KiB in 4 inodes", u)
	}
	if none, err := PodLogUsage(root, "ns", "gone", "uid-2"); err != nil || none != (Usage{}) {
		t.Errorf("a pod without logs: %+v %v", none, err)
	}
}

func TestMounted(t *testing.T) {
	dir := t.TempDir()
	for path, want := range map[string]bool{"/": true, "/proc": true, dir: false, filepath.Join(dir, "missing"): false} {
		if got := mounted(path); got != want {
			t.Errorf("mounted(%s) = %v, want %v", path, got, want)
		}
	}
}
