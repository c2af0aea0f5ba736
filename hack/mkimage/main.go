package main

import (
	"context"
	"debug/elf"
	"flag"
	"fmt"
	"os"

	"github.com/nodeagent/kubelet/internal/ociimage"
)

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: mkimage busybox|pause [--binary PATH] --out FILE --name REF")
	}
	kind := args[0]
	fl := flag.NewFlagSet("mkimage "+kind, flag.ContinueOnError)
	binary := fl.String("binary", "", "binary to pack (busybox default: /bin/busybox)")
	out := fl.String("out", "", "OCI archive to write")
	name := fl.String("name", "", "image reference, e.g. localhost/busybox:1.35")
	if err := fl.Parse(args[1:]); err != nil {
		return err
	}
	if fl.NArg() != 0 {
		return fmt.Errorf("unexpected arguments: %v", fl.Args())
	}
	if *out == "" || *name == "" {
		return fmt.Errorf("--out and --name are required")
	}

	var spec ociimage.Spec
	switch kind {
	case "busybox":
		if *binary == "" {
			*binary = "/bin/busybox"
		}
		applets, err := ociimage.BusyboxApplets(ctx, *binary)
		if err != nil {
			return err
		}
		spec = ociimage.Busybox(*binary, applets)
	case "pause":
		if *binary == "" {
			return fmt.Errorf("pause: --binary is required")
		}
		spec = ociimage.Pause(*binary)
	default:
		return fmt.Errorf("unknown image %q: want busybox or pause", kind)
	}

	if err := checkStatic(*binary); err != nil {
		return err
	}
	img, err := ociimage.Build(spec)
	if err != nil {
		return fmt.Errorf("build %s: %w", kind, err)
	}
	if err := img.WriteArchiveFile(*out, *name); err != nil {
		return fmt.Errorf("write %s: %w", *out, err)
	}
	fmt.Println(img.Digest())
	return nil
}

// checkStatic refuses a dynamically linked binary: the images hold no
// loader or libraries for it.
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the image needs a static binary", path)
		}
	}
	return nil
}
