package localstack

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// findRedisServer returns the path of redis-server from PATH.
func findRedisServer() (string, error) {
	p, err := exec.LookPath("redis-server")
	if err == nil {
		return p, nil
	}
	for _, c := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if isExecutable(c) {
			return c, nil
		}
	}
	return "", errors.New("localstack: redis-server not found in PATH: install it " +
		"(Debian/Ubuntu: apt-get install redis-server) or set RedisConfig.Binary")
}

// findPostgresBinDir returns a directory holding both postgres and initdb:
// the one of postgres found in PATH (symlinks resolved), else the highest
// version of /usr/lib/postgresql/*/bin.
func findPostgresBinDir() (string, error) {
	if p, err := exec.LookPath("postgres"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if isPostgresBinDir(dir) {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type cand struct {
		dir     string
		version float64
	}
	var cands []cand
	for _, m := range matches {
		v, err := strconv.ParseFloat(filepath.Base(filepath.Dir(m)), 64)
		if err != nil || !isPostgresBinDir(m) {
			continue
		}
		cands = append(cands, cand{m, v})
	}
	if len(cands) == 0 {
		return "", errors.New("localstack: PostgreSQL server binaries (postgres, initdb) not found " +
			"in PATH nor in /usr/lib/postgresql/*/bin: install them " +
			"(Debian/Ubuntu: apt-get install postgresql) or set PostgresConfig.BinDir")
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].version > cands[j].version })
	return cands[0].dir, nil
}

func isPostgresBinDir(dir string) bool {
	return isExecutable(filepath.Join(dir, "postgres")) && isExecutable(filepath.Join(dir, "initdb"))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func checkPostgresBinDir(dir string) error {
	if !isPostgresBinDir(dir) {
		return fmt.Errorf("localstack: PostgresConfig.BinDir %q does not hold executable postgres and initdb: "+
			"point it at the PostgreSQL bin directory (e.g. /usr/lib/postgresql/15/bin) or leave it empty to discover it", dir)
	}
	return nil
}
