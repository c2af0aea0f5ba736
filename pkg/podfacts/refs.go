package podfacts

import v1 "k8s.io/api/core/v1"

// Refs are the names of the secrets, configmaps and persistent volume claims a pod refers to.
type Refs struct{ Secrets, ConfigMaps, Claims []string }

// References walks pod once for what it refers to, as upstream's VisitPodSecretNames and
// VisitPodConfigmapNames: image pull secrets; volumes (projected ones, and the secret references of the
// other volume types, too); the envFrom and env valueFrom of every container, init container and ephemeral
// container; and the claims of persistentVolumeClaim and ephemeral volumes (<pod>-<volume>).
func References(pod *v1.Pod) Refs {
	var r Refs
	for _, s := range pod.Spec.ImagePullSecrets {
		r.Secrets = append(r.Secrets, s.Name)
	}
	secretRef := func(ref *v1.LocalObjectReference) {
		if ref != nil {
			r.Secrets = append(r.Secrets, ref.Name)
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.Secret != nil:
			r.Secrets = append(r.Secrets, v.Secret.SecretName)
		case v.ConfigMap != nil:
			r.ConfigMaps = append(r.ConfigMaps, v.ConfigMap.Name)
		case v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					r.Secrets = append(r.Secrets, src.Secret.Name)
				}
				if src.ConfigMap != nil {
					r.ConfigMaps = append(r.ConfigMaps, src.ConfigMap.Name)
				}
			}
		case v.PersistentVolumeClaim != nil:
			r.Claims = append(r.Claims, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			r.Claims = append(r.Claims, pod.Name+"-"+v.Name)
		case v.AzureFile != nil:
			r.Secrets = append(r.Secrets, v.AzureFile.SecretName)
		case v.CephFS != nil:
			secretRef(v.CephFS.SecretRef)
		case v.Cinder != nil:
			secretRef(v.Cinder.SecretRef)
		case v.FlexVolume != nil:
			secretRef(v.FlexVolume.SecretRef)
		case v.RBD != nil:
			secretRef(v.RBD.SecretRef)
		case v.ScaleIO != nil:
			secretRef(v.ScaleIO.SecretRef)
		case v.ISCSI != nil:
			secretRef(v.ISCSI.SecretRef)
		case v.StorageOS != nil:
			secretRef(v.StorageOS.SecretRef)
		case v.CSI != nil:
			secretRef(v.CSI.NodePublishSecretRef)
		}
	}
	env := func(envFrom []v1.EnvFromSource, vars []v1.EnvVar) {
		for _, e := range envFrom {
			if e.SecretRef != nil {
				r.Secrets = append(r.Secrets, e.SecretRef.Name)
			}
			if e.ConfigMapRef != nil {
				r.ConfigMaps = append(r.ConfigMaps, e.ConfigMapRef.Name)
			}
		}
		for _, e := range vars {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				r.Secrets = append(r.Secrets, e.ValueFrom.SecretKeyRef.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				r.ConfigMaps = append(r.ConfigMaps, e.ValueFrom.ConfigMapKeyRef.Name)
			}
		}
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			env(c.EnvFrom, c.Env)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		env(c.EnvFrom, c.Env)
	}
	return r
}
