package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pidsCgroup is a pids cgroup made for one launch: it caps the number of
// processes and threads in the sandbox and counts the forks it refused.
type pidsCgroup struct{ dir string }

// pidsCgroupParent returns the directory under which this process may
// create a pids cgroup: its own pids cgroup (v1), or its own cgroup when
// the unified hierarchy (v2) delegates the pids controller to it.
func pidsCgroupParent() (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	defer f.Close()
	var v1, v2 string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" && parts[0] == "0" {
			v2 = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "pids" {
				v1 = parts[2]
			}
		}
	}
	if v1 != "" {
		dir := filepath.Join("/sys/fs/cgroup/pids", v1)
		if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err == nil {
			return dir, nil
		}
	}
	if v2 != "" {
		dir := filepath.Join("/sys/fs/cgroup", v2)
		if b, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control")); err == nil && strings.Contains(" "+string(b)+" ", " pids") {
			return dir, nil
		}
	}
	return "", errors.New("no pids cgroup controller is available to this process")
}

// newPidsCgroup creates a fresh pids cgroup allowing max tasks.
func newPidsCgroup(max int) (*pidsCgroup, error) {
	parent, err := pidsCgroupParent()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "agentrt-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("creating a pids cgroup: %w", err)
	}
	cg := &pidsCgroup{dir: dir}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.Itoa(max)), 0); err != nil {
		cg.remove()
		return nil, fmt.Errorf("setting pids.max: %w", err)
	}
	return cg, nil
}

// add moves processes into the cgroup.
func (c *pidsCgroup) add(pids ...int) error {
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return err
		}
	}
	return nil
}

// hitMax reports whether a fork was refused because of pids.max.
func (c *pidsCgroup) hitMax() bool {
	b, err := os.ReadFile(filepath.Join(c.dir, "pids.events"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "max" {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n > 0
		}
	}
	return false
}

// remove deletes the cgroup; by then its processes are gone.
func (c *pidsCgroup) remove() { os.Remove(c.dir) }
