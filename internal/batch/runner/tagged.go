package runner

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// TagEnv is the environment variable that carries an attempt's Spec.Tag
// into a shell task and everything it starts.
const TagEnv = "TIDEMARK_RUN_TAG"

// EndTagged kills the process groups of every live process whose
// environment holds TagEnv=tag, and waits until they have exited. It ends
// what an attempt started even when its process group was never recorded:
// a daemon can die between starting a script and writing down its group,
// and the script's children inherit the tag. It returns how many groups it
// ended.
func EndTagged(tag string) (int, error) {
	if tag == "" {
		return 0, fmt.Errorf("end tagged processes: empty tag")
	}
	want := []byte(TagEnv + "=" + tag)
	d, err := os.Open("/proc")
	if err != nil {
		return 0, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return 0, fmt.Errorf("list /proc: %w", err)
	}
	groups := map[int]bool{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + name + "/environ")
		if err != nil || !hasEntry(env, want) {
			continue // exited, or not ours to read
		}
		st, err := readStat(pid)
		if err != nil || !st.alive() {
			continue
		}
		groups[st.pgrp] = true
	}
	deadline := time.Now().Add(reapTimeout)
	for pgid := range groups {
		if pgid <= 1 {
			continue
		}
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return 0, fmt.Errorf("kill process group %d: %w", pgid, err)
		}
		if err := waitGroupGone(pgid, deadline, maxPoll); err != nil {
			return 0, err
		}
	}
	return len(groups), nil
}

// hasEntry reports whether a NUL-separated environment holds entry exactly.
func hasEntry(env, entry []byte) bool {
	for len(env) > 0 {
		i := bytes.IndexByte(env, 0)
		if i < 0 {
			i = len(env)
		}
		if bytes.Equal(env[:i], entry) {
			return true
		}
		env = env[min(i+1, len(env)):]
	}
	return false
}
