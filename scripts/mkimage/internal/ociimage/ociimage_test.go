//go:build !race

// The race detector slows these tests' gunzip and tar reading tenfold
// (64 s instead of 7 s), and there is no concurrency of ours to check:
// scripts/test.sh runs them in a `go test` of their own, without -race.

package ociimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/invledger/invledger/adapters/testkit/localstack/localstacktest"
	"github.com/invledger/invledger/projections"
	"github.com/invledger/invledger/scripts/mkimage/internal/ociimage"
)

func TestMain(m *testing.M) { localstacktest.Main(m) }

var built struct {
	once  sync.Once
	img   v1.Image
	stamp ociimage.Stamp
	err   error
}

// builtImage builds the image as `make image` does, once per test binary:
// the go build takes seconds.
func builtImage(t *testing.T) (v1.Image, ociimage.Stamp) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the image (a go build of the whole binary): skipped with -short")
	}
	built.once.Do(func() {
		built.img, built.stamp, built.err = ociimage.Build(context.Background(), ociimage.Options{RepoDir: "../../../..", CABundle: ociimage.CABundle})
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.img, built.stamp
}

// written writes img as `make image` does and reads it back from the OCI
// layout, so a test sees what a user gets. It also checks that the
// docker-archive holds the same image: the same config, whose diff ids
// name the layers.
func written(t *testing.T, img v1.Image, stamp ociimage.Stamp) v1.Image {
	t.Helper()
	dir := t.TempDir()
	if err := ociimage.Write(dir, img, stamp); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(dir, ociimage.LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(manifest.Manifests) != 1 {
		t.Fatalf("the OCI layout holds %d images, want 1", len(manifest.Manifests))
	}
	fromLayout, err := idx.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	fromArchive, err := tarball.ImageFromPath(filepath.Join(dir, ociimage.ArchiveTar), nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]v1.Image{"OCI layout": fromLayout, "docker-archive": fromArchive} {
		if name, err := got.ConfigName(); err != nil || name != want {
			t.Fatalf("the %s's config is %s (%v), want %s", what, name, err, want)
		}
	}
	return fromLayout
}

// TestImageRunsFromItsExtractedTree checks the built image's config and
// runs its binary from its extracted filesystem, chrooted, as its user:
// --version, serve --help, migrate, then serve against private Redis and
// PostgreSQL (on 127.0.0.1, which the chroot shares) and one purchase.
func TestImageRunsFromItsExtractedTree(t *testing.T) {
	localstacktest.SkipShort(t)
	if os.Geteuid() != 0 {
		t.Skip("runs the image's binary under chroot, which needs root (CI runs as root)")
	}
	t.Parallel()
	built, stamp := builtImage(t)
	img := written(t, built, stamp)
	if err := ociimage.Verify(img); err != nil {
		t.Fatalf("the built image fails its checks:\n%v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	for label, want := range map[string]string{"version": stamp.Version, "revision": stamp.Revision, "licenses": "Apache-2.0"} {
		if got := c.Labels["org.opencontainers.image."+label]; got != want {
			t.Errorf("label org.opencontainers.image.%s = %q, want %q", label, got, want)
		}
	}
	if stamp.Version == "" || len(stamp.Revision) != 40 {
		t.Errorf("stamp %+v: want git describe's version and a full commit hash", stamp)
	}

	root := extract(t, img)
	uid, gid := user(t, c.User)

	out := runInImage(t, root, c, uid, gid, nil, "--version")
	// As cobra prints app.VersionDetail: the stamped version, then the commit
	// when the go command stamped one (not in a git worktree).
	m := regexp.MustCompile(`^invledger version (\S+) \((?:commit ([0-9a-f]{40})(?:, modified)?, )?go\S+\)\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != stamp.Version || (m[2] != "" && m[2] != stamp.Revision) {
		t.Fatalf("--version printed %q, want version %s (commit %s)", out, stamp.Version, stamp.Revision)
	}
	if out := runInImage(t, root, c, uid, gid, nil, "serve", "--help"); !strings.Contains(out, "--listen") {
		t.Fatalf("serve --help does not list --listen:\n%s", out)
	}

	redisURL, dbURL := localstacktest.Redis(t).URL(), localstacktest.Postgres(t)
	runInImage(t, root, c, uid, gid, []string{"INVLEDGER_DATABASE_URL=" + dbURL}, "migrate")

	const op, gw = "image-operator-secret-0001", "image-gateway-secret-00001"
	api := serveInImage(t, root, c, uid, gid, "INVLEDGER_REDIS_URL="+redisURL, "INVLEDGER_DATABASE_URL="+dbURL,
		"INVLEDGER_TOKENS=ops:operator:"+op+",shop:gateway:"+gw, "INVLEDGER_LOG_LEVEL=warn")
	call(t, "PUT", api+"/v1/skus/phone-x", op, `{"stock":5,"per_user_limit":1}`, http.StatusCreated)
	call(t, "POST", api+"/v1/skus/phone-x/warm", op, "", http.StatusOK)
	var receipt struct {
		Status    string `json:"status"`
		Remaining int    `json:"remaining"`
	}
	if err := json.Unmarshal([]byte(call(t, "POST", api+"/v1/skus/phone-x/deduct", gw, `{"user_id":"u-1","qty":1,"request_id":"image-1"}`, http.StatusOK)), &receipt); err != nil {
		t.Fatal(err)
	}
	if receipt.Status != "ok" || receipt.Remaining != 4 {
		t.Fatalf("deduct answered %+v, want ok with 4 remaining", receipt)
	}
	// serve kept its projector's instance id in the image's data dir, as its user.
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(root, ociimage.DataDir, projections.InstanceIDFile), &st); err != nil || int(st.Uid) != uid {
		t.Fatalf("instance id in the data dir: %v, owner %d, want owner %d", err, st.Uid, uid)
	}
}

// TestVerifyRefusesBrokenImages breaks the built image in each way a
// platform would trip over, in its config (checked over the filesystem
// read once) or with a layer on top (checked whole), and checks that the
// fault is named; the image itself passes.
func TestVerifyRefusesBrokenImages(t *testing.T) {
	t.Parallel()
	img, _ := builtImage(t)
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := ociimage.ReadFS(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := ociimage.Check(cf.Config, fs); err != nil {
		t.Fatalf("the built image fails its checks:\n%v", err)
	}
	dropLabel := func(name string) func(*v1.Config) {
		return func(c *v1.Config) { delete(c.Labels, name) }
	}
	for _, tc := range []struct {
		name string
		edit func(*v1.Config)
		want string
	}{
		{"root user", func(c *v1.Config) { c.User = "0" }, `user "0" is root`},
		{"root with a group", func(c *v1.Config) { c.User = "0:65532" }, `user "0:65532" is root`},
		{"no user, which is root", func(c *v1.Config) { c.User = "" }, `user "" is not numeric`},
		{"a user name", func(c *v1.Config) { c.User = "invledger" }, `user "invledger" is not numeric`},
		{"a user not in passwd", func(c *v1.Config) { c.User = "1000" }, "user 1000 is not in /etc/passwd"},
		{"no entrypoint", func(c *v1.Config) { c.Entrypoint = nil }, "no entrypoint"},
		{"entrypoint not in the image", func(c *v1.Config) { c.Entrypoint = []string{"/bin/sh"} }, "entrypoint /bin/sh is not an executable file"},
		{"no version label", dropLabel("org.opencontainers.image.version"), "label org.opencontainers.image.version is missing"},
		{"no licence label", dropLabel("org.opencontainers.image.licenses"), "label org.opencontainers.image.licenses is missing"},
		{"no source label", dropLabel("org.opencontainers.image.source"), "label org.opencontainers.image.source is missing"},
		{"no revision label", dropLabel("org.opencontainers.image.revision"), "label org.opencontainers.image.revision is missing"},
		{"another licence", func(c *v1.Config) { c.Labels["org.opencontainers.image.licenses"] = "MIT" }, `licenses is "MIT"`},
		{"listening on loopback", func(c *v1.Config) { c.Env = append(c.Env, "INVLEDGER_LISTEN=127.0.0.1:8080") }, "does not listen on every interface"},
		{"port not exposed", func(c *v1.Config) { c.ExposedPorts = nil }, `port "8080"/tcp of INVLEDGER_LISTEN is not exposed`},
		{"no data dir setting", func(c *v1.Config) { c.Env = c.Env[:1] }, `INVLEDGER_DATA_DIR "" is not a directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *cf.Config.DeepCopy()
			tc.edit(&c)
			if err := ociimage.Check(c, fs); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error with %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		entry tar.Header
		want  string
	}{
		{"CA bundle deleted by a later layer", tar.Header{Name: "etc/ssl/certs/.wh.ca-certificates.crt", Typeflag: tar.TypeReg}, "no CA bundle"},
		{"data dir owned by root", tar.Header{Name: "var/lib/invledger/", Typeflag: tar.TypeDir, Mode: 0o755}, "data dir /var/lib/invledger is not writable by user 65532"},
		{"tmp not writable", tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o755}, "no /tmp with mode 1777"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			if err := errors.Join(tw.WriteHeader(&tc.entry), tw.Close()); err != nil {
				t.Fatal(err)
			}
			l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil })
			if err != nil {
				t.Fatal(err)
			}
			broken, err := mutate.AppendLayers(img, l)
			if err != nil {
				t.Fatal(err)
			}
			if err := ociimage.Verify(broken); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Verify = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// extract unpacks the image's flattened filesystem into a new directory,
// with its owners and modes, and returns it.
func extract(t *testing.T, img v1.Image) string {
	t.Helper()
	root := t.TempDir()
	// The tree's root is the chrooted user's /: it must be able to enter it.
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return root
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.Clean("/"+h.Name))
		mode := os.FileMode(h.Mode).Perm()
		if h.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			err = writeFile(p, tr)
		default:
			t.Fatalf("the image holds %s of type %c, which this test does not unpack", h.Name, h.Typeflag)
		}
		if err == nil {
			err = errors.Join(os.Lchown(p, h.Uid, h.Gid), os.Chmod(p, mode))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(p string, r io.Reader) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	return errors.Join(err, f.Close())
}

// user parses the image's numeric "uid:gid".
func user(t *testing.T, s string) (uid, gid int) {
	t.Helper()
	u, g, _ := strings.Cut(s, ":")
	uid, err1 := strconv.Atoi(u)
	gid, err2 := strconv.Atoi(g)
	if err := errors.Join(err1, err2); err != nil {
		t.Fatalf("user %q: %v", s, err)
	}
	return uid, gid
}

// command is the image's entrypoint with args, chrooted into root as
// uid:gid, with the image's environment and then env.
func command(root string, c v1.Config, uid, gid int, env []string, args ...string) *exec.Cmd {
	return &exec.Cmd{
		Path: c.Entrypoint[0],
		Args: append(append([]string{}, c.Entrypoint...), args...),
		Env:  append(append([]string{}, c.Env...), env...),
		Dir:  "/",
		SysProcAttr: &syscall.SysProcAttr{
			Chroot:     root,
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
			Pdeathsig:  syscall.SIGKILL,
		},
	}
}

// runInImage runs a command of the image to its end and returns its
// standard output, failing t if it fails.
func runInImage(t *testing.T, root string, c v1.Config, uid, gid int, env []string, args ...string) string {
	t.Helper()
	cmd := command(root, c, uid, gid, env, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("invledger %s in the image: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return string(out)
}

// serveInImage starts `serve` (the image's default command) on a free port
// of the image's listen host, stops it with SIGTERM when the test ends
// (a clean exit expected), and returns its URL once /readyz answers 200.
func serveInImage(t *testing.T, root string, c v1.Config, uid, gid int, env ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	listen := fmt.Sprintf("0.0.0.0:%d", port)
	cmd := command(root, c, uid, gid, append(env, "INVLEDGER_LISTEN="+listen), c.Cmd...)
	var logs localstacktest.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("serve in the image exited with %v after SIGTERM:\n%s", err, logs.String())
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("serve in the image did not stop within 20s of SIGTERM:\n%s", logs.String())
		}
	})
	api := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("serve in the image exited: %v\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(api + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return api
			}
		}
	}
	t.Fatalf("serve in the image was not ready within 20s:\n%s", logs.String())
	return ""
}

// call sends one API request and returns its body, failing t unless the
// answer has status want.
func call(t *testing.T, method, url, token, body string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, resp.StatusCode, b, want)
	}
	return string(b)
}
