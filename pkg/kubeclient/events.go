package kubeclient

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// EventSink writes a record.EventBroadcaster's events through c, each in its own namespace, as client-go's
// typed EventSinkImpl does.
func EventSink(c Interface) record.EventSink { return eventSink{c} }

type eventSink struct{ c Interface }

func (s eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Create(context.Background(), e, metav1.CreateOptions{})
}

func (s eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.c.CoreV1().Events(e.Namespace).Update(context.Background(), e, metav1.UpdateOptions{})
}

func (s eventSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	if e.Name == "" {
		return nil, fmt.Errorf("patch event: no name")
	}
	return s.c.CoreV1().Events(e.Namespace).Patch(context.Background(), e.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
