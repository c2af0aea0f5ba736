package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodeagent/kubelet/pkg/podfacts"
)

// validateProbes checks a container's probes and lifecycle hooks as upstream's validation does, after
// defaulting (so a zero period has become 10 s and only a negative one is refused). Init containers other
// than sidecars (restartPolicy: Always) may carry neither.
func validateProbes(c *corev1.Container, p *field.Path, init bool) field.ErrorList {
	var errs field.ErrorList
	if init && !podfacts.IsSidecar(c) {
		for _, f := range []struct {
			name string
			set  bool
		}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
			{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
			if f.set {
				errs = append(errs, field.Forbidden(p.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
			}
		}
		return errs
	}
	for _, pr := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", c.LivenessProbe}, {"readinessProbe", c.ReadinessProbe}, {"startupProbe", c.StartupProbe}} {
		if pr.probe == nil {
			continue
		}
		pp := p.Child(pr.name)
		errs = append(errs, validateProbe(pr.probe, pp)...)
		switch {
		case pr.name != "readinessProbe" && pr.probe.SuccessThreshold != 1:
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		case pr.name == "readinessProbe" && pr.probe.TerminationGracePeriodSeconds != nil:
			errs = append(errs, field.Invalid(pp.Child("terminationGracePeriodSeconds"), *pr.probe.TerminationGracePeriodSeconds,
				"must not be set for readinessProbes"))
		}
	}
	if l := c.Lifecycle; l != nil {
		if h := l.PostStart; h != nil {
			errs = append(errs, validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, p.Child("lifecycle", "postStart"))...)
		}
		if h := l.PreStop; h != nil {
			errs = append(errs, validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, nil, h.Sleep, p.Child("lifecycle", "preStop"))...)
		}
	}
	return errs
}

func validateProbe(pr *corev1.Probe, p *field.Path) field.ErrorList {
	h := pr.ProbeHandler
	errs := validateHandler(h.Exec, h.HTTPGet, h.TCPSocket, h.GRPC, nil, p)
	for _, f := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", pr.InitialDelaySeconds}, {"timeoutSeconds", pr.TimeoutSeconds}, {"periodSeconds", pr.PeriodSeconds},
		{"successThreshold", pr.SuccessThreshold}, {"failureThreshold", pr.FailureThreshold}} {
		if f.v < 0 {
			errs = append(errs, field.Invalid(p.Child(f.name), f.v, "must be greater than or equal to 0"))
		}
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

// validateHandler checks that exactly one handler is set, and that one, as upstream's validateHandler.
func validateHandler(exec *corev1.ExecAction, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction,
	sleep *corev1.SleepAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if exec != nil {
		n++
		if len(exec.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if get != nil {
		if n++; n == 1 {
			if get.Path == "" {
				errs = append(errs, field.Required(p.Child("httpGet", "path"), ""))
			}
			errs = append(errs, validatePortNumOrName(get.Port, p.Child("httpGet", "port"))...)
			if get.Scheme != corev1.URISchemeHTTP && get.Scheme != corev1.URISchemeHTTPS {
				errs = append(errs, field.NotSupported(p.Child("httpGet", "scheme"), get.Scheme, []string{"HTTP", "HTTPS"}))
			}
			for i, hd := range get.HTTPHeaders {
				for _, msg := range validation.IsHTTPHeaderName(hd.Name) {
					errs = append(errs, field.Invalid(p.Child("httpGet", "httpHeaders").Index(i).Child("name"), hd.Name, msg))
				}
			}
		} else {
			errs = append(errs, field.Forbidden(p.Child("httpGet"), "may not specify more than 1 handler type"))
		}
	}
	if tcp != nil {
		if n++; n == 1 {
			errs = append(errs, validatePortNumOrName(tcp.Port, p.Child("tcpSocket", "port"))...)
		} else {
			errs = append(errs, field.Forbidden(p.Child("tcpSocket"), "may not specify more than 1 handler type"))
		}
	}
	if grpc != nil {
		if n++; n == 1 {
			if grpc.Port < 1 || grpc.Port > 65535 {
				errs = append(errs, field.Invalid(p.Child("grpc", "port"), grpc.Port, "must be between 1 and 65535, inclusive"))
			}
		} else {
			errs = append(errs, field.Forbidden(p.Child("grpc"), "may not specify more than 1 handler type"))
		}
	}
	if sleep != nil {
		if n++; n == 1 {
			if sleep.Seconds < 0 {
				errs = append(errs, field.Invalid(p.Child("sleep", "seconds"), sleep.Seconds, "must be non-negative"))
			}
		} else {
			errs = append(errs, field.Forbidden(p.Child("sleep"), "may not specify more than 1 handler type"))
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPortName(port.StrVal) {
			errs = append(errs, field.Invalid(p, port.StrVal, msg))
		}
		return errs
	}
	if port.IntVal < 1 || port.IntVal > 65535 {
		return field.ErrorList{field.Invalid(p, port.IntVal, "must be between 1 and 65535, inclusive")}
	}
	return nil
}
