package podfacts

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestContainerShouldRestart(t *testing.T) {
	policy := func(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
	rule := func(op v1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) []v1.ContainerRestartRule {
		return []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
			ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}}
	}
	tests := []struct {
		name      string
		pod       v1.RestartPolicy
		container *v1.ContainerRestartPolicy
		rules     []v1.ContainerRestartRule
		exit      int32
		want      bool
		killed    bool // RestartsWhenKilled
	}{
		{"pod Always", v1.RestartPolicyAlways, nil, nil, 0, true, true},
		{"pod OnFailure, success", v1.RestartPolicyOnFailure, nil, nil, 0, false, true},
		{"pod OnFailure, failure", v1.RestartPolicyOnFailure, nil, nil, 1, true, true},
		{"pod Never", v1.RestartPolicyNever, nil, nil, 1, false, false},
		{"container Always in a Never pod", v1.RestartPolicyNever, policy(v1.ContainerRestartPolicyAlways), nil, 0, true, true},
		{"container Never in an Always pod", v1.RestartPolicyAlways, policy(v1.ContainerRestartPolicyNever), nil, 1, false, false},
		{"container OnFailure, success", v1.RestartPolicyAlways, policy(v1.ContainerRestartPolicyOnFailure), nil, 0, false, true},
		{"rule In matches", v1.RestartPolicyNever, policy(v1.ContainerRestartPolicyNever), rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42, 43), 42, true, false},
		{"rule In misses: the container's policy", v1.RestartPolicyNever, policy(v1.ContainerRestartPolicyNever), rule(v1.ContainerRestartRuleOnExitCodesOpIn, 42), 1, false, false},
		{"rule NotIn matches", v1.RestartPolicyNever, policy(v1.ContainerRestartPolicyNever), rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0), 3, true, false},
		{"rule NotIn misses", v1.RestartPolicyAlways, policy(v1.ContainerRestartPolicyNever), rule(v1.ContainerRestartRuleOnExitCodesOpNotIn, 0), 0, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tt.container, RestartPolicyRules: tt.rules}
			spec := &v1.PodSpec{RestartPolicy: tt.pod}
			if got := ContainerShouldRestart(c, spec, tt.exit); got != tt.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tt.want)
			}
			if got := RestartsWhenKilled(c, spec); got != tt.killed {
				t.Errorf("RestartsWhenKilled = %v, want %v", got, tt.killed)
			}
		})
	}
}
