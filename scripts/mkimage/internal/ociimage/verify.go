package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Verify checks what a platform relies on when it runs the image, from its
// config and its flattened filesystem (later layers' whiteouts applied):
// a numeric non-root user listed in /etc/passwd; an entrypoint that is an
// executable, static binary in the image; the data dir, present and
// writable by that user; a listen address on every interface whose port
// is exposed; the OCI labels; a CA bundle; a /tmp anyone may write. It
// returns every failure, joined.
func Verify(img v1.Image) error {
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	files, err := ReadFS(img)
	if err != nil {
		return err
	}
	return Check(cf.Config, files)
}

// Check is Verify of a run configuration over a filesystem already read,
// so a test can try many configurations without reading the layer again.
func Check(c v1.Config, files FS) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	uidText, _, _ := strings.Cut(c.User, ":")
	uid, uidErr := strconv.Atoi(uidText)
	switch {
	case uidErr != nil:
		// Kubernetes' runAsNonRoot can only check a numeric user.
		fail("user %q is not numeric", c.User)
	case uid == 0:
		fail("user %q is root", c.User)
	case !passwdHas(files["/etc/passwd"].data, uid):
		fail("user %d is not in /etc/passwd", uid)
	}

	if len(c.Entrypoint) == 0 {
		fail("no entrypoint")
	} else if bin, ok := files[c.Entrypoint[0]]; !ok || bin.hdr.Typeflag != tar.TypeReg || bin.hdr.Mode&0o111 == 0 {
		fail("entrypoint %s is not an executable file in the image", c.Entrypoint[0])
	} else if _, err := archOf(bin.data); err != nil {
		fail("entrypoint %s: %v", c.Entrypoint[0], err)
	}

	env := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	dataDir := path.Clean(env["INVLEDGER_DATA_DIR"])
	if dir, ok := files[dataDir]; env["INVLEDGER_DATA_DIR"] == "" || !ok || dir.hdr.Typeflag != tar.TypeDir {
		fail("INVLEDGER_DATA_DIR %q is not a directory in the image", env["INVLEDGER_DATA_DIR"])
	} else if uidErr == nil && (dir.hdr.Uid != uid || dir.hdr.Mode&0o200 == 0) {
		fail("data dir %s is not writable by user %d (owner %d, mode %o)", dataDir, uid, dir.hdr.Uid, dir.hdr.Mode)
	}
	host, port, _ := strings.Cut(env["INVLEDGER_LISTEN"], ":")
	if host != "0.0.0.0" {
		fail("INVLEDGER_LISTEN %q does not listen on every interface", env["INVLEDGER_LISTEN"])
	}
	if _, ok := c.ExposedPorts[port+"/tcp"]; !ok {
		fail("port %q/tcp of INVLEDGER_LISTEN is not exposed (exposed: %v)", port, c.ExposedPorts)
	}

	for _, l := range []string{"source", "version", "revision", "licenses"} {
		if c.Labels["org.opencontainers.image."+l] == "" {
			fail("label org.opencontainers.image.%s is missing", l)
		}
	}
	if got := c.Labels["org.opencontainers.image.licenses"]; got != "" && got != License {
		fail("label org.opencontainers.image.licenses is %q, not %s", got, License)
	}

	if !bytes.Contains(files[CABundle].data, []byte("-----BEGIN CERTIFICATE-----")) {
		fail("no CA bundle at %s", CABundle)
	}
	if tmp, ok := files["/tmp"]; !ok || tmp.hdr.Typeflag != tar.TypeDir || tmp.hdr.Mode&0o1777 != 0o1777 {
		fail("no /tmp with mode 1777")
	}
	return errors.Join(errs...)
}

// FS is an image's flattened filesystem by absolute path.
type FS map[string]file

// file is one entry of an FS, with its contents when Check reads them.
type file struct {
	hdr  *tar.Header
	data []byte
}

// ReadFS reads the image's flattened filesystem, with the contents of
// /etc/passwd, the CA bundle and every executable.
func ReadFS(img v1.Image) (FS, error) {
	contents := []string{"/etc/passwd", CABundle}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := FS{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("ociimage: read the image's filesystem: %w", err)
		}
		name := path.Clean("/" + h.Name)
		f := file{hdr: h}
		if h.Typeflag == tar.TypeReg && (slices.Contains(contents, name) || h.Mode&0o111 != 0) {
			if f.data, err = io.ReadAll(tr); err != nil {
				return nil, err
			}
		}
		files[name] = f
	}
}

// passwdHas reports whether an /etc/passwd has a line for uid.
func passwdHas(passwd []byte, uid int) bool {
	for line := range strings.Lines(string(passwd)) {
		if f := strings.Split(line, ":"); len(f) >= 7 && f[2] == strconv.Itoa(uid) {
			return true
		}
	}
	return false
}
