package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strings"

	"github.com/containernetworking/cni/libcni"
)

// The bridge and ptp plugins' "ipMasq" gives every pod a NAT chain of its own: four iptables calls on ADD and
// three on DEL, each reading the whole table under the host's xtables lock, so that pods starting or stopping
// together wait on each other (15 ms per ADD and 55 ms per DEL here, alone). The node masquerades the same
// traffic with one chain for the whole pod network instead:
//
//	-A POSTROUTING -s <subnet> -j NODEAGENT-POD-MASQ      (one per subnet)
//	-A NODEAGENT-POD-MASQ -d <subnet> -j ACCEPT          (traffic within the pod network keeps its source)
//	-A NODEAGENT-POD-MASQ ! -d 224.0.0.0/4 -j MASQUERADE (as the plugins; ff00::/8 for IPv6)
//
// and runs those plugins with ipMasq off. A DEL runs with the configuration its ADD ran with (libcni's cache),
// so pods attached with the plugin's own chains still have them removed.

// masqChain is the nat chain the node's pod masquerade rules live in.
const masqChain = "NODEAGENT-POD-MASQ"

// masqPlugins are the plugins whose ipMasq the node takes over.
var masqPlugins = map[string]bool{"bridge": true, "ptp": true}

// delegateMasquerade returns list with ipMasq turned off in the bridge and ptp plugins that turn it on and
// whose IPAM names the subnets it allocates from, and those subnets. It returns list itself and no subnets
// when no plugin qualifies.
func delegateMasquerade(list *libcni.NetworkConfigList) (*libcni.NetworkConfigList, []*net.IPNet, error) {
	var raw map[string]any
	dec := json.NewDecoder(bytes.NewReader(list.Bytes))
	dec.UseNumber() // numbers come back as written
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, fmt.Errorf("parse network %q: %w", list.Name, err)
	}
	plugins, _ := raw["plugins"].([]any)
	var subnets []*net.IPNet
	for _, p := range plugins {
		plugin, _ := p.(map[string]any)
		if masq, _ := plugin["ipMasq"].(bool); !masq {
			continue
		}
		if t, _ := plugin["type"].(string); !masqPlugins[t] {
			continue
		}
		if _, ok := plugin["ipMasqBackend"]; ok {
			continue // a plugin told which backend to masquerade with (nftables, say) keeps doing it
		}
		found := ipamSubnets(plugin["ipam"])
		if len(found) == 0 {
			continue
		}
		plugin["ipMasq"] = false
		subnets = append(subnets, found...)
	}
	if len(subnets) == 0 {
		return list, nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, nil, err
	}
	out, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return nil, nil, fmt.Errorf("network %q without ipMasq: %w", list.Name, err)
	}
	return withFilePlugins(out, list), subnets, nil
}

// withFilePlugins returns list with the plugins of from that were read from files beside its configuration (libcni
// loads <dir>/<network>/*.conf after the inline plugins), which list's bytes do not hold.
func withFilePlugins(list, from *libcni.NetworkConfigList) *libcni.NetworkConfigList {
	var raw struct {
		Plugins []json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(from.Bytes, &raw); err != nil || len(raw.Plugins) >= len(from.Plugins) {
		return list
	}
	out := *list
	out.Plugins = append(append([]*libcni.PluginConfig(nil), list.Plugins...), from.Plugins[len(raw.Plugins):]...)
	return &out
}

// ipamSubnets reads the subnets of a host-local IPAM configuration: its "ranges" or its single "subnet".
func ipamSubnets(ipam any) []*net.IPNet {
	conf, _ := ipam.(map[string]any)
	if t, _ := conf["type"].(string); t != "host-local" {
		return nil
	}
	var subnets []string
	if s, ok := conf["subnet"].(string); ok {
		subnets = append(subnets, s)
	}
	ranges, _ := conf["ranges"].([]any)
	for _, set := range ranges {
		set, _ := set.([]any)
		for _, r := range set {
			r, _ := r.(map[string]any)
			if s, ok := r["subnet"].(string); ok {
				subnets = append(subnets, s)
			}
		}
	}
	var out []*net.IPNet
	for _, s := range subnets {
		if _, n, err := net.ParseCIDR(s); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Iptables runs the host's iptables tools for the node's pod masquerade.
type Iptables interface {
	// Run runs iptables (ip6tables when v6) with args and returns its standard output.
	Run(ctx context.Context, v6 bool, args ...string) (string, error)
	// Restore loads rules, in iptables-save's format, with iptables-restore --noflush (ip6tables-restore when
	// v6): all of them in one transaction, leaving alone the chains they do not name.
	Restore(ctx context.Context, v6 bool, rules string) error
}

// hostIptables is the host's iptables, waiting up to 5 s for the xtables lock.
type hostIptables struct{}

// hasHostIptables says whether the host has the tools hostIptables runs.
func hasHostIptables() bool {
	for _, bin := range []string{"iptables", "iptables-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			return false
		}
	}
	return true
}

func (hostIptables) Run(ctx context.Context, v6 bool, args ...string) (string, error) {
	return runTool(ctx, tool("iptables", v6), "", append([]string{"-w", "5"}, args...)...)
}

func (hostIptables) Restore(ctx context.Context, v6 bool, rules string) error {
	_, err := runTool(ctx, tool("iptables-restore", v6), rules, "-w", "5", "--noflush")
	return err
}

// tool is name, or its IPv6 twin (ip6tables...).
func tool(name string, v6 bool) string {
	if v6 {
		return "ip6" + strings.TrimPrefix(name, "ip")
	}
	return name
}

func runTool(ctx context.Context, bin, stdin string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// masqChainRules is the content of masqChain for subnets of one family, as `iptables -S` prints it.
func masqChainRules(subnets []*net.IPNet, v6 bool) []string {
	rules := []string{"-N " + masqChain}
	for _, s := range subnets {
		rules = append(rules, "-A "+masqChain+" -d "+s.String()+" -j ACCEPT")
	}
	multicast := "224.0.0.0/4"
	if v6 {
		multicast = "ff00::/8"
	}
	return append(rules, "-A "+masqChain+" ! -d "+multicast+" -j MASQUERADE")
}

// masqChainRestore is the iptables-restore input that makes masqChain hold rules (as masqChainRules returns
// them), creating the chain if it is missing: one transaction, so that pods never go without masquerade
// while the chain is rewritten, and a failure leaves the chain as it was.
func masqChainRestore(rules []string) string {
	var b strings.Builder
	b.WriteString("*nat\n:" + masqChain + " - [0:0]\n-F " + masqChain + "\n")
	for _, r := range rules[1:] {
		b.WriteString(r + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// ensureMasquerade makes the nat table masquerade traffic from subnets to anywhere outside them, rewriting
// masqChain when it differs from what subnets need.
func ensureMasquerade(ctx context.Context, ipt Iptables, subnets []*net.IPNet) error {
	byFamily := map[bool][]*net.IPNet{}
	for _, s := range subnets {
		v6 := s.IP.To4() == nil
		byFamily[v6] = append(byFamily[v6], s)
	}
	for _, v6 := range []bool{false, true} {
		family := byFamily[v6]
		if len(family) == 0 {
			continue
		}
		want := masqChainRules(family, v6)
		got, err := ipt.Run(ctx, v6, "-t", "nat", "-S", masqChain)
		if err != nil || strings.Join(want, "\n") != strings.TrimSpace(got) {
			if err := ipt.Restore(ctx, v6, masqChainRestore(want)); err != nil {
				return fmt.Errorf("masquerade pod network: %w", err)
			}
		}
		for _, s := range family {
			jump := []string{"POSTROUTING", "-s", s.String(), "-j", masqChain}
			if _, err := ipt.Run(ctx, v6, append([]string{"-t", "nat", "-C"}, jump...)...); err == nil {
				continue
			}
			if _, err := ipt.Run(ctx, v6, append([]string{"-t", "nat", "-A"}, jump...)...); err != nil {
				return fmt.Errorf("masquerade pod network: %w", err)
			}
		}
	}
	return nil
}
