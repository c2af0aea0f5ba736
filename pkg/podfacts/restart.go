package podfacts

import v1 "k8s.io/api/core/v1"

// ContainerShouldRestart says whether a container that exited with exitCode restarts, as upstream's
// podutil.ContainerShouldRestart with ContainerRestartRules on (beta and on by default in 1.35): the
// container's restartPolicyRules first (the first rule whose exit codes match decides; action Restart
// restarts), then its own restartPolicy, then the pod's.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c, exitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	default:
		return true
	}
}

// RestartsWhenKilled says whether a container the kubelet stops (a failed liveness or startup probe, a
// changed definition) starts again, as upstream decides it: by the container's restartPolicy when it has one
// (rules do not apply: there is no exit code to match), else by the pod's.
func RestartsWhenKilled(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return spec.RestartPolicy != v1.RestartPolicyNever
}

// RunsOnce says whether a container that exited 0 stays exited when the pod's sandbox is created again:
// restartPolicy OnFailure, the container's own when set, else the pod's.
func RunsOnce(c *v1.Container, spec *v1.PodSpec) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// matchingRestartRule returns the first of the container's restartPolicyRules whose exit codes match.
func matchingRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := false
		for _, v := range rule.ExitCodes.Values {
			if v == exitCode {
				in = true
				break
			}
		}
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}
