package podspec

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	v1 "k8s.io/api/core/v1"
)

// hashedContainer lists the container fields whose change restarts a running container. The field set and
// names are ours and fixed, so the hash stays the same across kubelet and API library upgrades; fields that
// can change in place (resources, probes, image pull policy) or only matter at the next start are left out.
type hashedContainer struct {
	Name          string                     `json:"n"`
	Image         string                     `json:"i"`
	Command       []string                   `json:"c,omitempty"`
	Args          []string                   `json:"a,omitempty"`
	WorkingDir    string                     `json:"w,omitempty"`
	Ports         []hashedPort               `json:"p,omitempty"`
	Env           []hashedEnv                `json:"e,omitempty"`
	EnvFrom       []string                   `json:"ef,omitempty"`
	Mounts        []hashedMount              `json:"m,omitempty"`
	Privileged    bool                       `json:"pr,omitempty"`
	RunAsUser     *int64                     `json:"u,omitempty"`
	RunAsGroup    *int64                     `json:"g,omitempty"`
	ReadOnlyRoot  bool                       `json:"ro,omitempty"`
	CapsAdd       []v1.Capability            `json:"ca,omitempty"`
	CapsDrop      []v1.Capability            `json:"cd,omitempty"`
	Stdin         bool                       `json:"si,omitempty"`
	StdinOnce     bool                       `json:"so,omitempty"`
	TTY           bool                       `json:"t,omitempty"`
	RestartPolicy *v1.ContainerRestartPolicy `json:"r,omitempty"`
}

type hashedPort struct {
	Name     string `json:"n,omitempty"`
	Port     int32  `json:"p"`
	HostPort int32  `json:"h,omitempty"`
	HostIP   string `json:"hi,omitempty"`
	Protocol string `json:"pr,omitempty"`
}

type hashedEnv struct {
	Name  string `json:"n"`
	Value string `json:"v,omitempty"`
	From  string `json:"f,omitempty"`
}

type hashedMount struct {
	Name     string `json:"n"`
	Path     string `json:"p"`
	SubPath  string `json:"s,omitempty"`
	ReadOnly bool   `json:"r,omitempty"`
}

// HashContainer returns the stable hash of the fields of c that matter for a running container.
func HashContainer(c *v1.Container) string {
	h := hashedContainer{
		Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, WorkingDir: c.WorkingDir,
		Stdin: c.Stdin, StdinOnce: c.StdinOnce, TTY: c.TTY, RestartPolicy: c.RestartPolicy,
	}
	for _, p := range c.Ports {
		h.Ports = append(h.Ports, hashedPort{p.Name, p.ContainerPort, p.HostPort, p.HostIP, string(p.Protocol)})
	}
	for _, e := range c.Env {
		he := hashedEnv{Name: e.Name, Value: e.Value}
		if e.ValueFrom != nil {
			if b, err := json.Marshal(e.ValueFrom); err == nil {
				he.From = string(b)
			}
		}
		h.Env = append(h.Env, he)
	}
	for _, e := range c.EnvFrom {
		if b, err := json.Marshal(e); err == nil {
			h.EnvFrom = append(h.EnvFrom, string(b))
		}
	}
	for _, m := range c.VolumeMounts {
		h.Mounts = append(h.Mounts, hashedMount{m.Name, m.MountPath, m.SubPath, m.ReadOnly})
	}
	if sc := c.SecurityContext; sc != nil {
		h.Privileged = sc.Privileged != nil && *sc.Privileged
		h.RunAsUser, h.RunAsGroup = sc.RunAsUser, sc.RunAsGroup
		h.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
		if sc.Capabilities != nil {
			h.CapsAdd, h.CapsDrop = sc.Capabilities.Add, sc.Capabilities.Drop
		}
	}
	b, _ := json.Marshal(h) // plain structs of strings and numbers: cannot fail
	f := fnv.New64a()
	_, _ = f.Write(b)
	return strconv.FormatUint(f.Sum64(), 16)
}
