package localstack

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// osUser is the unprivileged user PostgreSQL runs as when we are root.
type osUser struct {
	name string
	uid  int
	gid  int
	gids []int // primary and supplementary groups
}

func lookupPostgresUser() (*osUser, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("localstack: running as root, and PostgreSQL refuses to run as root, "+
			"but there is no postgres OS user to run it as (%v): create one (useradd --system --user-group postgres), "+
			"or run as a non-root user", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("localstack: postgres OS user has non-numeric uid %q or gid %q", u.Uid, u.Gid)
	}
	ou := &osUser{name: u.Username, uid: uid, gid: gid, gids: []int{gid}}
	if ids, err := u.GroupIds(); err == nil {
		for _, s := range ids {
			if g, err := strconv.Atoi(s); err == nil && !slices.Contains(ou.gids, g) {
				ou.gids = append(ou.gids, g)
			}
		}
	}
	return ou, nil
}

// credential returns the credential to run a child as u, or nil for u == nil.
func (u *osUser) credential() *syscall.Credential {
	if u == nil {
		return nil
	}
	groups := make([]uint32, 0, len(u.gids))
	for _, g := range u.gids {
		groups = append(groups, uint32(g))
	}
	return &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: groups}
}

// checkCanReach checks that u may traverse every ancestor of dir.
func (u *osUser) checkCanReach(dir string) error {
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("localstack: stat %s: %w", d, err)
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		perm := fi.Mode().Perm()
		var x os.FileMode
		switch {
		case int(st.Uid) == u.uid:
			x = perm & 0o100
		case slices.Contains(u.gids, int(st.Gid)):
			x = perm & 0o010
		default:
			x = perm & 0o001
		}
		if x == 0 {
			return fmt.Errorf("localstack: running as root, so PostgreSQL runs as the %s user (uid %d), "+
				"which cannot reach %s: %s is mode %04o owned by uid %d. "+
				"Put PostgresConfig.Dir somewhere it can reach, e.g. a directory from os.MkdirTemp(\"\", ...) "+
				"(t.TempDir() is not: its parents are 0700), or chmod o+x %s",
				u.name, u.uid, dir, d, uint32(perm), st.Uid, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}
