package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodeagent/kubelet/pkg/apiserver"
	"github.com/nodeagent/kubelet/pkg/apiserver/registry"
	"github.com/nodeagent/kubelet/pkg/apiserver/storage"
	"github.com/nodeagent/kubelet/pkg/nodedefaults"
)

// defaultSnapshotDataDir is the data directory of a standalone kubelet's API server (its
// --apiserver-data-dir), where snapshots are usually taken.
const defaultSnapshotDataDir = nodedefaults.RootDir + "/apiserver"

const snapshotUsage = `usage: apiserver snapshot save FILE [--data-dir DIR] [--kubeconfig FILE]
       apiserver snapshot restore FILE [--data-dir DIR]

save writes a consistent copy of the store (DIR/state.db) to FILE, taken while the server serves: a serving
server holds its store file locked, so save asks it over HTTPS (GET /snapshot, admins only) with the admin
kubeconfig (default DIR/../admin.kubeconfig, then DIR/admin.kubeconfig); with no server running it reads the
file itself. The copy is verified (every object decodes) before FILE is written.

restore replaces DIR/state.db with FILE, once FILE opens and every object in it decodes. It is refused while
a server runs on DIR (stop the kubelet, or the API server, first); the replaced file is kept beside it as
state.db.before-restore-<time>.

The data directory defaults to ` + defaultSnapshotDataDir + ` (a standalone kubelet's --apiserver-data-dir).
`

// runSnapshot runs `apiserver snapshot ...`.
func runSnapshot(args []string) error {
	if len(args) < 1 {
		return errors.New(snapshotUsage)
	}
	verb := args[0]
	fs := flag.NewFlagSet("snapshot "+verb, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dataDir := fs.String("data-dir", defaultSnapshotDataDir, "the API server's data directory")
	kubeconfig := fs.String("kubeconfig", "", "admin kubeconfig of the serving API server")
	timeout := fs.Duration("timeout", 5*time.Minute, "how long a save may take")
	// FILE may come before or after the flags.
	var file string
	more := args[1:]
	if len(more) > 0 && !strings.HasPrefix(more[0], "-") {
		file, more = more[0], more[1:]
	}
	if err := fs.Parse(more); err != nil {
		return fmt.Errorf("%v\n%s", err, snapshotUsage)
	}
	if file == "" && fs.NArg() == 1 {
		file = fs.Arg(0)
	} else if fs.NArg() > 0 || file == "" {
		return errors.New(snapshotUsage)
	}
	store := filepath.Join(*dataDir, "state.db")
	switch verb {
	case "save":
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		defer cancel()
		return snapshotSave(ctx, store, file, *kubeconfig)
	case "restore":
		sum, err := storage.Verify(file, registry.New().Codec())
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", file, err)
		}
		aside, err := storage.Restore(file, store, registry.New().Codec())
		if err != nil {
			return err
		}
		fmt.Printf("restored %s into %s: %d objects at resourceVersion %d\n", file, store, sum.Objects, sum.ResourceVersion)
		if aside != "" {
			fmt.Printf("the replaced store is kept at %s\n", aside)
		}
		return nil
	}
	return errors.New(snapshotUsage)
}

// snapshotSave writes the snapshot to a temporary file beside file, verifies it, and renames it into place.
func snapshotSave(ctx context.Context, store, file, kubeconfig string) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	from := "the store file " + store
	_, err = storage.BackupFile(store, tmp, time.Second)
	if errors.Is(err, storage.ErrInUse) {
		from = "the API server serving " + filepath.Dir(store)
		err = snapshotFromServer(ctx, filepath.Dir(store), kubeconfig, tmp)
	}
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", store, err)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	sum, err := storage.Verify(tmp.Name(), registry.New().Codec())
	if err != nil {
		return fmt.Errorf("the snapshot taken does not verify: %w", err)
	}
	if err := os.Chmod(tmp.Name(), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return err
	}
	fmt.Printf("snapshot saved to %s from %s: %d objects at resourceVersion %d\n", file, from, sum.Objects, sum.ResourceVersion)
	return nil
}

// snapshotFromServer asks the server serving dataDir for its snapshot, as an admin.
func snapshotFromServer(ctx context.Context, dataDir, kubeconfig string, out io.Writer) error {
	if kubeconfig == "" {
		for _, c := range []string{filepath.Join(filepath.Dir(dataDir), "admin.kubeconfig"), filepath.Join(dataDir, "admin.kubeconfig")} {
			if _, err := os.Stat(c); err == nil {
				kubeconfig = c
				break
			}
		}
		if kubeconfig == "" {
			return errors.New("a server holds the store file, and no admin kubeconfig was found beside it: set --kubeconfig")
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+apiserver.SnapshotPath, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s answered %s: %s", cfg.Host, resp.Status, strings.TrimSpace(string(body)))
	}
	n, err := io.Copy(out, resp.Body)
	if err != nil {
		return err
	}
	if want, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); err == nil && n != want {
		return fmt.Errorf("snapshot cut short: %d of %d bytes", n, want)
	}
	return nil
}
