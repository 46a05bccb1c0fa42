package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// A bad OTLP endpoint, from the flag or the environment, is a one-line
// startup error and exit code 1, before anything is served.
func TestBadTracesEndpoint(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--otlp-traces-endpoint", "collector:4318"}, "", "--otlp-traces-endpoint"},
		{nil, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=ftp://collector", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{nil, "OTEL_EXPORTER_OTLP_ENDPOINT=http://", "OTEL_EXPORTER_OTLP_ENDPOINT"},
	} {
		// The deadline only stops a regression that would serve.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		args := append([]string{"serve", "--host", "127.0.0.1", "--port", "1"}, c.args...)
		cmd := exec.CommandContext(ctx, os.Args[0], args...)
		cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
		if c.env != "" {
			cmd.Env = append(cmd.Env, c.env)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		cancel()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("%v %s: exit %v, want code 1; stderr %q", c.args, c.env, err, stderr.String())
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "error: ") || !strings.Contains(msg, c.want) {
			t.Errorf("%v %s: stderr %q, want one error line naming %s", c.args, c.env, msg, c.want)
		}
	}
}
