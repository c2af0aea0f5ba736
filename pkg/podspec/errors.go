package podspec

import "errors"

// ErrConfigRef marks a container config that cannot be built from what the pod refers to or asks for (an env
// reference that cannot be resolved, a security profile or mount the node refuses): the container waits
// with CreateContainerConfigError.
var ErrConfigRef = errors.New("container config reference")
