package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgres is a PostgreSQL server of this run: a cluster made by initdb in
// a temporary directory, served on loopback with fsync and synchronous
// commit on, stopped and removed at the end.
type postgres struct {
	bin      string // the folder of initdb and pg_ctl
	dir      string // the cluster's folder: data/, the socket, the log
	port     int
	asUser   string // run as this user (PostgreSQL refuses root), or "" for this process's
	URL      string
	Version  string
	Settings map[string]string
}

// findPostgres finds the folder of initdb and pg_ctl: on PATH, or the
// newest of Debian's /usr/lib/postgresql/N/bin.
func findPostgres() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) < pgMajor(dirs[j]) })
	if len(dirs) == 0 {
		return "", fmt.Errorf("PostgreSQL's initdb and pg_ctl are neither on PATH nor in /usr/lib/postgresql/*/bin (apt-get install postgresql; make bench-peers does it as root)")
	}
	return filepath.Dir(dirs[len(dirs)-1]), nil
}

// pgMajor is the major version in a path /usr/lib/postgresql/N/bin/pg_ctl
// (N is 15, or 9.6 before PostgreSQL 10), or 0.
func pgMajor(pgCtl string) float64 {
	n, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(pgCtl))), 64)
	return n
}

// startPostgres makes a cluster in dir and starts it on a free loopback
// port. As root it runs the server as the user postgres (made by Debian's
// package), through runuser.
func startPostgres(ctx context.Context, dir string) (*postgres, error) {
	bin, err := findPostgres()
	if err != nil {
		return nil, err
	}
	pg := &postgres{bin: bin, dir: dir}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("PostgreSQL will not run as root, and there is no user postgres to run it as (Debian's postgresql package makes one): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// The server's user must reach dir: its parent is this run's
		// temporary folder (mode 0700 as made), opened to traversal.
		if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		pg.asUser = "postgres"
	}
	if pg.port, err = freePort(); err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// -N: initdb's own files are not synced (this cluster lives for one
	// run); the server's fsync setting is its own, set on below.
	if err := pg.run(ctx, "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "-N"); err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c fsync=on -c synchronous_commit=on -c full_page_writes=on -c max_connections=300",
		pg.port, dir)
	if err := pg.run(ctx, "pg_ctl", "-D", data, "-l", filepath.Join(dir, "server.log"), "-w", "-t", "120", "-o", opts, "start"); err != nil {
		return nil, err
	}
	pg.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/agentrt_peers?sslmode=disable", pg.port)
	if err := pg.readSettings(ctx); err != nil {
		pg.stop()
		return nil, err
	}
	if pg.Settings["fsync"] != "on" || pg.Settings["synchronous_commit"] != "on" {
		pg.stop()
		return nil, fmt.Errorf("PostgreSQL runs with fsync=%s synchronous_commit=%s, want both on", pg.Settings["fsync"], pg.Settings["synchronous_commit"])
	}
	return pg, nil
}

func (pg *postgres) readSettings(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port))
	if err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(cctx, "SHOW server_version").Scan(&pg.Version); err != nil {
		return err
	}
	pg.Settings = map[string]string{}
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method"} {
		var v string
		if err := conn.QueryRow(cctx, "SHOW "+name).Scan(&v); err != nil {
			return err
		}
		pg.Settings[name] = v
	}
	return nil
}

func (pg *postgres) run(ctx context.Context, prog string, args ...string) error {
	path := filepath.Join(pg.bin, prog)
	var cmd *exec.Cmd
	if pg.asUser != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", pg.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = pg.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", prog, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// stop stops the server (fast shutdown).
func (pg *postgres) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return pg.run(ctx, "pg_ctl", "-D", filepath.Join(pg.dir, "data"), "-m", "fast", "-w", "stop")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
