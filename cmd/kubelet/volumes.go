package main

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeagent/kubelet/pkg/kubeclient"
	"github.com/nodeagent/kubelet/pkg/volume"
)

// volumeAPI is what the volume manager reads, through the kubelet's pods client.
type volumeAPI struct{ c kubeclient.Interface }

var _ volume.API = volumeAPI{}

func (a volumeAPI) ConfigMap(ctx context.Context, ns, name string) (*v1.ConfigMap, error) {
	return a.c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a volumeAPI) Secret(ctx context.Context, ns, name string) (*v1.Secret, error) {
	return a.c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a volumeAPI) ServiceAccountToken(ctx context.Context, ns, name string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return a.c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, req, metav1.CreateOptions{})
}

func (a volumeAPI) PersistentVolumeClaim(ctx context.Context, ns, name string) (*v1.PersistentVolumeClaim, error) {
	return a.c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a volumeAPI) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return a.c.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}
