package cni

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// TemplateFile is the configuration a rendered template is written to in the configuration directory, as
// containerd's CRI plugin names its own: it sorts first, so it is the one used.
const TemplateFile = "10-nodeagent-net.conflist"

// TemplateData is what a CNI configuration template sees, as containerd's conf_template does: the node's
// pod CIDRs (the first, and all), and a default route per family.
type TemplateData struct {
	PodCIDR       string
	PodCIDRRanges []string
	Routes        []string
}

// RenderTemplate writes the configuration the template file makes for the comma-separated pod CIDRs into
// confDir/TemplateFile, atomically, and reports whether it changed. A template that does not parse or
// render, or CIDRs that do not parse, are errors naming them, and nothing is written.
func RenderTemplate(templateFile, confDir, podCIDRs string) (bool, error) {
	data := TemplateData{}
	families := map[string]bool{}
	for _, c := range strings.Split(podCIDRs, ",") {
		c = strings.TrimSpace(c)
		ip, _, err := net.ParseCIDR(c)
		if err != nil {
			return false, fmt.Errorf("pod CIDR %q: %w", c, err)
		}
		data.PodCIDRRanges = append(data.PodCIDRRanges, c)
		route := "0.0.0.0/0"
		if ip.To4() == nil {
			route = "::/0"
		}
		if !families[route] {
			families[route] = true
			data.Routes = append(data.Routes, route)
		}
	}
	data.PodCIDR = data.PodCIDRRanges[0]
	text, err := os.ReadFile(templateFile)
	if err != nil {
		return false, fmt.Errorf("CNI configuration template: %w", err)
	}
	tmpl, err := template.New(filepath.Base(templateFile)).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return false, fmt.Errorf("CNI configuration template %s: %w", templateFile, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, data); err != nil {
		return false, fmt.Errorf("CNI configuration template %s: %w", templateFile, err)
	}
	dst := filepath.Join(confDir, TemplateFile)
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, out.Bytes()) {
		return false, nil
	}
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		return false, err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, out.Bytes(), 0o644); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		_ = os.Remove(tmp)
		return false, err
	}
	return true, nil
}
