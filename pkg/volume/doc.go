// Package volume sets up the volumes of a pod on the host, under the pod's directory, as upstream's volume
// manager lays them out (<root dir>/pods/<uid>/volumes/<plugin>/<name>, volume-subpaths, ...), and makes
// subPath mounts without a race with the pod's containers.
//
// It owns what it mounts and writes below the pod directories, and removes it; it never follows a link out of
// a volume, and never removes anything outside the pod directories it is given.
package volume
