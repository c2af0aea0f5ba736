package criserver

import (
	"context"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// eventBuffer is how many events may wait between the runtime and a slow stream.
const eventBuffer = 256

type eventStream = grpc.ServerStreamingServer[runtimeapi.ContainerEventResponse]

// GetContainerEvents streams the runtime's container events until the client goes away, the runtime's stream
// ends, or the server stops.
func (s *Server) GetContainerEvents(_ *runtimeapi.GetEventsRequest, stream eventStream) error {
	ctx, cancel := context.WithCancel(stream.Context())
	ch := make(chan *runtimeapi.ContainerEventResponse, eventBuffer)
	exited := make(chan struct{})
	var rtErr error
	go func() {
		rtErr = s.rt.GetContainerEvents(ctx, ch, nil)
		close(exited)
	}()
	defer func() {
		cancel()
		go drainUntil(ch, exited) // a producer blocked on ch must see ctx is done
	}()
	for {
		select {
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-exited:
			if err := sendBuffered(stream, ch); err != nil {
				return err
			}
			if ctx.Err() != nil {
				return nil
			}
			return toStatus(rtErr)
		case <-ctx.Done():
			return nil
		case <-s.quit:
			return nil
		}
	}
}

// sendBuffered sends the events still waiting in ch.
func sendBuffered(stream eventStream, ch <-chan *runtimeapi.ContainerEventResponse) error {
	for {
		select {
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// drainUntil discards events from ch until done is closed.
func drainUntil(ch <-chan *runtimeapi.ContainerEventResponse, done <-chan struct{}) {
	for {
		select {
		case <-ch:
		case <-done:
			return
		}
	}
}
