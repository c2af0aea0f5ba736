package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func TestDelegateMasquerade(t *testing.T) {
	for _, tc := range []struct {
		name        string
		plugin      string
		wantSubnets []string
	}{
		{"bridge with ranges", `{"type":"bridge","ipMasq":true,"mtu":1450,"ipam":{"type":"host-local","ranges":[[{"subnet":"10.88.0.0/16"}],[{"subnet":"fd00:88::/64"}]]}}`, []string{"10.88.0.0/16", "fd00:88::/64"}},
		{"bridge with one subnet", `{"type":"bridge","ipMasq":true,"ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, []string{"10.1.2.0/24"}},
		{"ptp", `{"type":"ptp","ipMasq":true,"ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, []string{"10.1.2.0/24"}},
		{"masquerade off", `{"type":"bridge","ipMasq":false,"ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, nil},
		{"masquerade unset", `{"type":"bridge","ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, nil},
		{"subnets the node cannot know", `{"type":"bridge","ipMasq":true,"ipam":{"type":"dhcp"}}`, nil},
		{"another plugin", `{"type":"macvlan","ipMasq":true,"ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, nil},
		{"a masquerade backend chosen", `{"type":"bridge","ipMasq":true,"ipMasqBackend":"nftables","ipam":{"type":"host-local","subnet":"10.1.2.0/24"}}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := libcni.NetworkConfFromBytes([]byte(`{"cniVersion":"1.0.0","name":"net","plugins":[` + tc.plugin + `,{"type":"portmap","capabilities":{"portMappings":true}}]}`))
			if err != nil {
				t.Fatal(err)
			}
			out, subnets, err := delegateMasquerade(in)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range subnets {
				got = append(got, s.String())
			}
			if !reflect.DeepEqual(got, tc.wantSubnets) {
				t.Fatalf("subnets %v, want %v", got, tc.wantSubnets)
			}
			if tc.wantSubnets == nil {
				if out != in {
					t.Fatalf("configuration rewritten though the node masquerades nothing")
				}
				return
			}
			var plugin map[string]any
			if err := json.Unmarshal(out.Plugins[0].Bytes, &plugin); err != nil {
				t.Fatal(err)
			}
			if plugin["ipMasq"] != false {
				t.Fatalf("plugin still masquerades: %s", out.Plugins[0].Bytes)
			}
			if strings.Contains(tc.plugin, "mtu") && !strings.Contains(string(out.Plugins[0].Bytes), `"mtu":1450`) {
				t.Fatalf("other settings changed: %s", out.Plugins[0].Bytes)
			}
			if len(out.Plugins) != 2 || out.Name != "net" || out.CNIVersion != "1.0.0" {
				t.Fatalf("list changed: %+v", out)
			}
			if !strings.Contains(string(out.Bytes), `"ipMasq":false`) {
				t.Fatalf("list bytes (what libcni caches) still masquerade: %s", out.Bytes)
			}
		})
	}
}

// fakeIptables keeps a nat table per family, as `iptables -S` prints its rules, and records the calls.
type fakeIptables struct {
	chains      map[string][]string // "4/CHAIN" or "6/CHAIN" -> rules
	calls       []string
	failRestore bool
}

func family(v6 bool) string {
	if v6 {
		return "6"
	}
	return "4"
}

func (f *fakeIptables) Run(_ context.Context, v6 bool, args ...string) (string, error) {
	fam := family(v6)
	f.calls = append(f.calls, fam+" "+strings.Join(args, " "))
	if len(args) < 4 || args[0] != "-t" || args[1] != "nat" {
		return "", fmt.Errorf("unexpected call %v", args)
	}
	op, chain, rule := args[2], args[3], strings.Join(args[4:], " ")
	key := fam + "/" + chain
	rules, exists := f.chains[key]
	if !exists && chain != "POSTROUTING" {
		return "", errors.New("no chain/target/match by that name")
	}
	switch op {
	case "-S":
		out := "-N " + chain + "\n"
		for _, r := range rules {
			out += "-A " + chain + " " + r + "\n"
		}
		return out, nil
	case "-A":
		f.chains[key] = append(rules, rule)
	case "-C":
		for _, r := range rules {
			if r == rule {
				return "", nil
			}
		}
		return "", errors.New("bad rule")
	default:
		return "", fmt.Errorf("unexpected op %s", op)
	}
	return "", nil
}

// Restore applies the nat table's lines of an iptables-restore --noflush input all at once, or none of them.
func (f *fakeIptables) Restore(_ context.Context, v6 bool, rules string) error {
	fam := family(v6)
	f.calls = append(f.calls, fam+" restore")
	if f.failRestore {
		return errors.New("iptables-restore: line 3 failed")
	}
	lines := strings.Split(strings.TrimSpace(rules), "\n")
	if len(lines) < 2 || lines[0] != "*nat" || lines[len(lines)-1] != "COMMIT" {
		return fmt.Errorf("not one nat table: %q", rules)
	}
	next := map[string][]string{}
	for k, v := range f.chains {
		next[k] = append([]string(nil), v...)
	}
	for _, l := range lines[1 : len(lines)-1] {
		fields := strings.Fields(l)
		switch {
		case strings.HasPrefix(l, ":"):
			if _, ok := next[fam+"/"+l[1:strings.IndexByte(l, ' ')]]; !ok {
				next[fam+"/"+l[1:strings.IndexByte(l, ' ')]] = []string{}
			}
		case len(fields) == 2 && fields[0] == "-F":
			next[fam+"/"+fields[1]] = []string{}
		case len(fields) > 2 && fields[0] == "-A":
			key := fam + "/" + fields[1]
			if _, ok := next[key]; !ok {
				return fmt.Errorf("no chain %s", fields[1])
			}
			next[key] = append(next[key], strings.Join(fields[2:], " "))
		default:
			return fmt.Errorf("unexpected line %q", l)
		}
	}
	f.chains = next
	return nil
}

func TestEnsureMasquerade(t *testing.T) {
	ctx := context.Background()
	subnets := ipamSubnets(map[string]any{"type": "host-local", "ranges": []any{
		[]any{map[string]any{"subnet": "10.88.0.0/16"}}, []any{map[string]any{"subnet": "fd00:88::/64"}}}})
	f := &fakeIptables{chains: map[string][]string{"4/POSTROUTING": {"-j CNI-HOSTPORT-MASQ"}}}
	if err := ensureMasquerade(ctx, f, subnets); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"4/POSTROUTING":  {"-j CNI-HOSTPORT-MASQ", "-s 10.88.0.0/16 -j " + masqChain},
		"4/" + masqChain: {"-d 10.88.0.0/16 -j ACCEPT", "! -d 224.0.0.0/4 -j MASQUERADE"},
		"6/POSTROUTING":  {"-s fd00:88::/64 -j " + masqChain},
		"6/" + masqChain: {"-d fd00:88::/64 -j ACCEPT", "! -d ff00::/8 -j MASQUERADE"},
	}
	if !reflect.DeepEqual(f.chains, want) {
		t.Fatalf("nat table\n%v\nwant\n%v", f.chains, want)
	}

	// In place: checked, not rewritten.
	f.calls = nil
	if err := ensureMasquerade(ctx, f, subnets); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.calls {
		if !strings.Contains(c, " -S ") && !strings.Contains(c, " -C ") {
			t.Fatalf("rules in place, yet %q ran (calls %v)", c, f.calls)
		}
	}

	// A rewrite that fails leaves the chain as it was.
	f.chains["4/"+masqChain] = []string{"! -d 224.0.0.0/4 -j MASQUERADE"}
	f.failRestore = true
	if err := ensureMasquerade(ctx, f, subnets); err == nil {
		t.Fatal("failed rewrite: no error")
	}
	if got := f.chains["4/"+masqChain]; !reflect.DeepEqual(got, []string{"! -d 224.0.0.0/4 -j MASQUERADE"}) {
		t.Fatalf("chain after a failed rewrite %v", got)
	}
	f.failRestore = false

	// Changed behind the node's back: made right again, in order, in one transaction.
	f.calls = nil
	f.chains["4/"+masqChain] = []string{"! -d 224.0.0.0/4 -j MASQUERADE"}
	f.chains["4/POSTROUTING"] = nil
	if err := ensureMasquerade(ctx, f, subnets); err != nil {
		t.Fatal(err)
	}
	if got := f.chains["4/"+masqChain]; !reflect.DeepEqual(got, want["4/"+masqChain]) {
		t.Fatalf("chain %v, want %v", got, want["4/"+masqChain])
	}
	for _, c := range f.calls {
		if strings.Contains(c, masqChain) && (strings.Contains(c, " -F ") || strings.Contains(c, " -A "+masqChain)) {
			t.Fatalf("chain rewritten rule by rule: %q (calls %v)", c, f.calls)
		}
	}
	if got := f.chains["4/POSTROUTING"]; !reflect.DeepEqual(got, []string{"-s 10.88.0.0/16 -j " + masqChain}) {
		t.Fatalf("POSTROUTING %v", got)
	}
}

func TestMasqueradeTakenOverFromTheBridgePlugin(t *testing.T) {
	dir := t.TempDir()
	conf := strings.Replace(conflist, `"bridge":"br0",`, `"bridge":"br0","ipMasq":true,`, 1)
	if err := os.WriteFile(filepath.Join(dir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	fx := &fakeExec{}
	ipt := &fakeIptables{chains: map[string][]string{}}
	cache := t.TempDir()
	m := New(Config{ConfDir: dir, BinDirs: []string{"/fake"}, CacheDir: cache, Exec: fx, Iptables: ipt})
	ctx := context.Background()
	for _, id := range []string{"sb1", "sb2"} {
		if _, err := m.Setup(ctx, id, "/var/run/netns/"+id, Pod{Name: id, Namespace: "default", UID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range fx.calls {
		if c.stdin["ipMasq"] != false {
			t.Fatalf("bridge ADD with ipMasq %v, want false", c.stdin["ipMasq"])
		}
	}
	if got := ipt.chains["4/POSTROUTING"]; !reflect.DeepEqual(got, []string{"-s 10.88.0.0/16 -j " + masqChain}) {
		t.Fatalf("POSTROUTING %v", got)
	}
	setupCalls := len(ipt.calls)

	// An attachment made by a runtime that let the plugin masquerade (its cached ADD configuration says
	// ipMasq true) is detached with that configuration, so that the plugin removes its chain.
	rt := runtimeConf("old", "/var/run/netns/old", Pod{Name: "old", Namespace: "default", UID: "old"})
	legacy, err := libcni.NetworkConfFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	writeCachedConfig(t, m, legacy, rt)
	fx.calls = nil
	for _, id := range []string{"sb1", "old"} {
		if err := m.Teardown(ctx, id, "/var/run/netns/"+id, Pod{Name: id, Namespace: "default", UID: id}); err != nil {
			t.Fatal(err)
		}
	}
	var masq []any
	for _, c := range fx.calls {
		masq = append(masq, c.stdin["ipMasq"])
	}
	if !reflect.DeepEqual(masq, []any{false, true}) {
		t.Fatalf("DEL calls with ipMasq %v, want false for sb1 and true for the old attachment", masq)
	}
	if len(ipt.calls) != setupCalls {
		t.Fatalf("a DEL ran iptables: %v", ipt.calls[setupCalls:])
	}
}

// writeCachedConfig stores list as the configuration the attachment rt was added with, as libcni does.
func writeCachedConfig(t *testing.T, m *Manager, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) {
	t.Helper()
	fx := &fakeExec{}
	c := libcni.NewCNIConfigWithCacheDir([]string{"/fake"}, m.cfg.CacheDir, fx)
	if _, err := c.AddNetworkList(context.Background(), list, rt); err != nil {
		t.Fatal(err)
	}
}

// What iptables-nft 1.8.9 prints for the chain (`iptables -t nat -S NODEAGENT-POD-MASQ`, captured on Debian 12):
// the node must find its rules in place there, or it would rewrite the chain at every check.
func TestMasqChainRulesMatchIptablesOutput(t *testing.T) {
	const printed = "-N NODEAGENT-POD-MASQ\n-A NODEAGENT-POD-MASQ -d 10.88.0.0/16 -j ACCEPT\n-A NODEAGENT-POD-MASQ ! -d 224.0.0.0/4 -j MASQUERADE\n"
	subnets := ipamSubnets(map[string]any{"type": "host-local", "subnet": "10.88.0.0/16"})
	if got := strings.Join(masqChainRules(subnets, false), "\n"); got != strings.TrimSpace(printed) {
		t.Fatalf("rules\n%s\nwant what iptables prints\n%s", got, printed)
	}
}

// Plugins libcni reads from <dir>/<network>/*.conf (not in the list's bytes) still run when the node takes
// the masquerade over, on ADD and on DEL.
func TestPluginsFromFilesKept(t *testing.T) {
	dir := t.TempDir()
	conf := strings.Replace(conflist, `"bridge":"br0",`, `"bridge":"br0","ipMasq":true,`, 1)
	if err := os.WriteFile(filepath.Join(dir, "10-test.conflist"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "test"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test", "extra.conf"), []byte(`{"type":"tuning"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fx := &fakeExec{}
	ipt := &fakeIptables{chains: map[string][]string{}}
	m := New(Config{ConfDir: dir, BinDirs: []string{"/fake"}, CacheDir: t.TempDir(), Exec: fx, Iptables: ipt})
	pod := Pod{Name: "p", Namespace: "default", UID: "u"}
	if _, err := m.Setup(context.Background(), "sb1", "/var/run/netns/sb1", pod); err != nil {
		t.Fatal(err)
	}
	if err := m.Teardown(context.Background(), "sb1", "/var/run/netns/sb1", pod); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range fx.calls {
		got = append(got, c.env["CNI_COMMAND"]+" "+c.plugin)
	}
	want := []string{"ADD bridge", "ADD tuning", "DEL tuning", "DEL bridge"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("plugin calls %v, want %v", got, want)
	}
}
