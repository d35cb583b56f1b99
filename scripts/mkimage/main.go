// Command mkimage is `make image`: it builds invledger's container image
// with package ociimage, checks it with ociimage.Verify, writes it under
// -out and prints its size and how long the build took.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/invledger/invledger/scripts/mkimage/internal/ociimage"
)

func main() {
	out := flag.String("out", "bin/image", "directory to write the OCI layout and the docker-archive tarball into")
	version := flag.String("version", "", "version to stamp, as make build does (make passes `git describe --always --dirty`)")
	ca := flag.String("ca-bundle", ociimage.CABundle, "the build machine's CA bundle to copy into the image")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, ociimage.Options{RepoDir: ".", Version: *version, CABundle: *ca}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, opts ociimage.Options) error {
	start := time.Now()
	img, stamp, err := ociimage.Build(ctx, opts)
	if err != nil {
		return err
	}
	if err := ociimage.Verify(img); err != nil {
		return fmt.Errorf("the image fails its checks:\n%w", err)
	}
	if err := ociimage.Write(out, img, stamp); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	compressed, err := layers[0].Size()
	if err != nil {
		return err
	}
	unpacked, err := layers[0].Uncompressed()
	if err != nil {
		return err
	}
	defer unpacked.Close()
	size, err := io.Copy(io.Discard, unpacked)
	if err != nil {
		return err
	}
	fmt.Printf("invledger:%s %s (commit %s)\n", stamp.Version, digest, stamp.Revision)
	fmt.Printf("  %.1f MB compressed, %.1f MB unpacked, built in %.1fs\n", float64(compressed)/1e6, float64(size)/1e6, time.Since(start).Seconds())
	fmt.Printf("  OCI layout  %s\n", filepath.Join(out, ociimage.LayoutDir))
	fmt.Printf("  docker load -i %s\n", filepath.Join(out, ociimage.ArchiveTar))
	return nil
}
