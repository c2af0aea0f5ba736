package kubeletconfig

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"
)

// Merge reads the configuration file (the kubelet's --config; may be empty) and the *.conf files of the
// drop-in directory (--config-dir; may be empty), each YAML or JSON, and merges the drop-ins over the file in
// lexical order as a JSON merge patch, each field of a drop-in replacing the file's, as upstream merges
// kubelet.conf.d. It returns the merged JSON document and the files it holds, space separated, for errors.
// With neither file nor directory it returns a nil document. An error names the flag or the file.
func Merge(file, dropInDir string) (doc []byte, sources string, err error) {
	if file == "" && dropInDir == "" {
		return nil, "", nil
	}
	sources = file
	doc = []byte("{}")
	if file != "" {
		raw, err := os.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("--config: %w", err)
		}
		if doc, err = yaml.YAMLToJSON(raw); err != nil {
			return nil, "", fmt.Errorf("kubelet config %s: %w", file, err)
		}
	}
	if dropInDir == "" {
		return doc, sources, nil
	}
	dropIns, err := filepath.Glob(filepath.Join(dropInDir, "*.conf"))
	if err != nil {
		return nil, "", fmt.Errorf("--config-dir: %w", err)
	}
	sort.Strings(dropIns)
	for _, d := range dropIns {
		raw, err := os.ReadFile(d)
		if err != nil {
			return nil, "", fmt.Errorf("--config-dir: %w", err)
		}
		patch, err := yaml.YAMLToJSON(raw)
		if err != nil {
			return nil, "", fmt.Errorf("kubelet config %s: %w", d, err)
		}
		if doc, err = jsonpatch.MergePatch(doc, patch); err != nil {
			return nil, "", fmt.Errorf("kubelet config %s: %w", d, err)
		}
		sources += " " + d
	}
	return doc, strings.TrimSpace(sources), nil
}
