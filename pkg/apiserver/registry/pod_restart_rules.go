package registry

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateRestartRules checks the containers' restartPolicy and restartPolicyRules as kube-apiserver 1.35 does
// with ContainerRestartRules on: rules need a restartPolicy, at most 20 rules of action Restart, each with
// exit codes (operator In or NotIn, at most 255 values); a sidecar (an init container with Always) takes no
// rules.
func validateRestartRules(s *corev1.PodSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range s.InitContainers {
		c := &s.InitContainers[i]
		p := path.Child("initContainers").Index(i)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if len(c.RestartPolicyRules) > 0 {
				errs = append(errs, field.Forbidden(p.Child("restartPolicyRules"), "restartPolicyRules are not allowed for init containers with restart policy Always"))
			}
			continue
		}
		errs = append(errs, validateContainerRestartPolicy(c, p)...)
	}
	for i := range s.Containers {
		errs = append(errs, validateContainerRestartPolicy(&s.Containers[i], path.Child("containers").Index(i))...)
	}
	return errs
}

func validateContainerRestartPolicy(c *corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy == nil {
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Required(p.Child("restartPolicy"), "must specify restartPolicy when restart rules are used"))
		}
		return errs
	}
	switch *c.RestartPolicy {
	case corev1.ContainerRestartPolicyAlways, corev1.ContainerRestartPolicyNever, corev1.ContainerRestartPolicyOnFailure:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, []string{"Always", "Never", "OnFailure"}))
	}
	if len(c.RestartPolicyRules) > 20 {
		errs = append(errs, field.TooLong(p.Child("restartPolicyRules"), c.RestartPolicyRules, 20))
	}
	for i, rule := range c.RestartPolicyRules {
		rp := p.Child("restartPolicyRules").Index(i)
		if rule.Action != corev1.ContainerRestartRuleActionRestart {
			errs = append(errs, field.NotSupported(rp.Child("action"), rule.Action, []string{string(corev1.ContainerRestartRuleActionRestart)}))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(rp.Child("exitCodes"), "must be specified"))
			continue
		}
		switch rule.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn, corev1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			errs = append(errs, field.NotSupported(rp.Child("exitCodes", "operator"), rule.ExitCodes.Operator, []string{"In", "NotIn"}))
		}
		if len(rule.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooLong(rp.Child("exitCodes", "values"), rule.ExitCodes.Values, 255))
		}
	}
	return errs
}
