// Package ociimage builds invledger's container image without a base
// image, a registry or a container daemon: a static binary, the build
// machine's CA bundle, an /etc/passwd naming one numeric non-root user and
// a data directory it owns, in one layer on an empty image, written with
// go-containerregistry as an OCI layout and a docker-archive tarball.
// `make image` (scripts/mkimage) and its test both go through Build.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs. A chart or compose file that runs
// the image relies on these: runAsUser, the data-dir mount, the port.
const (
	UID        = 65532 // the user the image runs as; the same number as distroless's nonroot
	BinaryPath = "/usr/local/bin/invledger"
	DataDir    = "/var/lib/invledger"
	Port       = 8080
	CABundle   = "/etc/ssl/certs/ca-certificates.crt" // where Go's crypto/x509 looks first on Linux
	License    = "Apache-2.0"
	Source     = "https://github.com/invledger/invledger"
)

// versionVar is the variable `make build` stamps, so the image's binary
// prints the same --version as bin/invledger of the same commit.
const versionVar = "github.com/invledger/invledger/adapters/app.version"

// Stamp is the build an image carries: the version stamped into the
// binary and the commit it was built from, as git tells them (the go
// command's own VCS stamp is missing in a git worktree and under
// GOFLAGS=-buildvcs=false, so it cannot be the source).
type Stamp struct {
	Version  string    // `git describe --always --dirty` unless Options.Version says otherwise
	Revision string    // the commit's full hash
	Time     time.Time // the commit's time
}

// GitStamp is the stamp of the checkout at dir, with version as its
// version unless version is empty.
func GitStamp(ctx context.Context, dir, version string) (Stamp, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("ociimage: git %s (the image is built from a git checkout): %w", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var s Stamp
	var err error
	if s.Version = version; s.Version == "" {
		if s.Version, err = git("describe", "--always", "--dirty"); err != nil {
			return Stamp{}, err
		}
	}
	if s.Revision, err = git("rev-parse", "HEAD"); err != nil {
		return Stamp{}, err
	}
	when, err := git("log", "-1", "--format=%cI", "HEAD")
	if err != nil {
		return Stamp{}, err
	}
	if s.Time, err = time.Parse(time.RFC3339, when); err != nil {
		return Stamp{}, fmt.Errorf("ociimage: commit time %q: %w", when, err)
	}
	return s, nil
}

// Options says what Build builds.
type Options struct {
	// RepoDir is the repository root (the main module's directory).
	RepoDir string
	// Version is stamped into the binary as `make build` does; make passes
	// $(VERSION), and empty means `git describe --always --dirty`.
	Version string
	// CABundle is the build machine's CA bundle, copied into the image at
	// the CABundle path; mkimage's -ca-bundle defaults to that same path
	// (Debian's ca-certificates), so no default is kept here.
	CABundle string
}

// Build compiles a static binary of ./cmd/invledger and returns the image
// holding it, with its stamp. The image is reproducible: every file's time
// and the created time are the commit's, so one commit built with one Go
// toolchain gives one digest.
func Build(ctx context.Context, opts Options) (v1.Image, Stamp, error) {
	stamp, err := GitStamp(ctx, opts.RepoDir, opts.Version)
	if err != nil {
		return nil, Stamp{}, err
	}
	ca, err := os.ReadFile(opts.CABundle)
	if err != nil {
		return nil, Stamp{}, fmt.Errorf("ociimage: the image needs the build machine's CA bundle for rediss:// and TLS PostgreSQL (Debian: apt-get install ca-certificates): %w", err)
	}
	tmp, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return nil, Stamp{}, err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "invledger")
	// -s -w drop the symbol table and DWARF (a third of the size); panics
	// still print their stack traces, from the pclntab.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+versionVar+"="+stamp.Version, "-o", bin, "./cmd/invledger")
	cmd.Dir = opts.RepoDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, Stamp{}, fmt.Errorf("ociimage: go build: %w\n%s", err, out)
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, Stamp{}, err
	}
	arch, err := archOf(binary)
	if err != nil {
		return nil, Stamp{}, err
	}
	layer, err := newLayer(stamp.Time, binary, ca)
	if err != nil {
		return nil, Stamp{}, err
	}
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: stamp.Time},
			CreatedBy: "make image (scripts/mkimage)",
			Comment:   "invledger " + stamp.Version + ": static binary, CA bundle, passwd, data dir",
		},
	})
	if err != nil {
		return nil, Stamp{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, Stamp{}, err
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = arch, "linux"
	cf.Created = v1.Time{Time: stamp.Time}
	cf.Config = Config(stamp)
	img, err = mutate.ConfigFile(mutate.ConfigMediaType(img, types.OCIConfigJSON), cf)
	if err != nil {
		return nil, Stamp{}, err
	}
	return img, stamp, nil
}

// Config is the image's run configuration for a build: the numeric user,
// the entrypoint (`serve` by default, any other command as arguments), the
// settings a container needs that differ from a laptop's (listen on every
// interface, the data dir in the image), the port and the OCI labels.
func Config(s Stamp) v1.Config {
	return v1.Config{
		User:         fmt.Sprintf("%d:%d", UID, UID),
		Entrypoint:   []string{BinaryPath},
		Cmd:          []string{"serve"},
		Env:          []string{"PATH=" + path.Dir(BinaryPath), "INVLEDGER_DATA_DIR=" + DataDir, fmt.Sprintf("INVLEDGER_LISTEN=0.0.0.0:%d", Port)},
		ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "invledger",
			"org.opencontainers.image.source":   Source,
			"org.opencontainers.image.version":  s.Version,
			"org.opencontainers.image.revision": s.Revision,
			"org.opencontainers.image.created":  s.Time.UTC().Format(time.RFC3339),
			"org.opencontainers.image.licenses": License,
		},
	}
}

// archOf is the architecture of a Go binary built for the image, which
// must not link C: it would not start on an empty image. Build and Verify
// both ask it, so the image is refused for the same reasons either way.
func archOf(binary []byte) (string, error) {
	bi, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		return "", fmt.Errorf("ociimage: read the binary's build info: %w", err)
	}
	var arch, cgo string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "GOARCH":
			arch = kv.Value
		case "CGO_ENABLED":
			cgo = kv.Value
		}
	}
	if cgo != "0" {
		return "", fmt.Errorf("ociimage: the binary is not static (CGO_ENABLED=%q)", cgo)
	}
	return arch, nil
}

// newLayer is the image's one layer, gzipped once here so that writing the
// layout and the tarball do not compress it again.
func newLayer(mtime time.Time, binary, ca []byte) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\ninvledger:x:%d:%d:invledger:%s:/sbin/nologin\n", UID, UID, DataDir)
	group := fmt.Sprintf("root:x:0:\ninvledger:x:%d:\n", UID)
	type entry struct {
		name     string
		mode     int64
		uid      int
		contents []byte // nil for a directory
	}
	entries := []entry{
		{"etc/", 0o755, 0, nil},
		{"etc/passwd", 0o644, 0, []byte(passwd)},
		{"etc/group", 0o644, 0, []byte(group)},
		{"etc/ssl/", 0o755, 0, nil},
		{"etc/ssl/certs/", 0o755, 0, nil},
		{strings.TrimPrefix(CABundle, "/"), 0o644, 0, ca},
		{"tmp/", 0o1777, 0, nil},
		{"usr/", 0o755, 0, nil},
		{"usr/local/", 0o755, 0, nil},
		{"usr/local/bin/", 0o755, 0, nil},
		{strings.TrimPrefix(BinaryPath, "/"), 0o755, 0, binary},
		{"var/", 0o755, 0, nil},
		{"var/lib/", 0o755, 0, nil},
		{strings.TrimPrefix(DataDir, "/") + "/", 0o755, UID, nil},
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: mtime}
		if e.contents == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.contents); err != nil {
			return nil, err
		}
	}
	if err := errors.Join(tw.Close(), zw.Close()); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// Paths under Write's directory: the OCI image layout (for skopeo, crane
// or `podman pull oci:`) and the docker-archive tarball (`docker load -i`,
// `podman load -i`), tagged invledger:<version>.
const (
	LayoutDir  = "oci"
	ArchiveTar = "invledger.tar"
)

// Write writes img into dir as an OCI image layout and a docker-archive
// tarball, replacing what an earlier build wrote there.
func Write(dir string, img v1.Image, s Stamp) error {
	tag, err := name.NewTag("invledger:" + s.Version)
	if err != nil {
		return fmt.Errorf("ociimage: version %q is not a valid image tag: %w", s.Version, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, LayoutDir)); err != nil {
		return err
	}
	p, err := layout.Write(filepath.Join(dir, LayoutDir), empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": s.Version})); err != nil {
		return err
	}
	return tarball.WriteToFile(filepath.Join(dir, ArchiveTar), tag, img)
}
