package criserver

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ListImages lists images matching the filter.
func (s *Server) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	imgs, err := s.img.ListImages(ctx, req.GetFilter())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.ListImagesResponse{Images: imgs}, nil
}

// ImageStatus reports an image; a missing image is an empty response, not an error.
func (s *Server) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	return reply(s.img.ImageStatus(ctx, req.GetImage(), req.GetVerbose()))
}

// PullImage pulls an image with the given credentials and returns its reference.
func (s *Server) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref, err := s.img.PullImage(ctx, req.GetImage(), req.GetAuth(), req.GetSandboxConfig())
	if err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.PullImageResponse{ImageRef: ref}, nil
}

// RemoveImage removes an image.
func (s *Server) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	if err := s.img.RemoveImage(ctx, req.GetImage()); err != nil {
		return nil, toStatus(err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

// ImageFsInfo reports the filesystems holding images and container layers.
func (s *Server) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return reply(s.img.ImageFsInfo(ctx))
}
