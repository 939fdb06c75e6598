package main

import (
	"errors"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/internal/obs"
)

// monitor is the process's metrics registry and readiness checks, served
// on [metrics].listen when set.
type monitor struct {
	reg    *prometheus.Registry
	health obs.Health
	srv    *obs.Server
}

// startMonitor creates the process's metrics registry and, when
// [metrics].listen is set, serves /metrics, /healthz and /readyz (and
// /debug/pprof/ with [metrics].pprof).
func startMonitor(c conf.Metrics, log *slog.Logger) (*monitor, error) {
	m := &monitor{reg: obs.NewRegistry()}
	if c.Listen == "" {
		return m, nil
	}
	srv, err := obs.Serve(c.Listen, m.reg, &m.health, log.With("component", "metrics"), obs.Profiling(c.Pprof))
	if err != nil {
		return nil, err
	}
	m.srv = srv
	return m, nil
}

// add registers a component's collectors and readiness check.
func (m *monitor) add(name string, collectors []prometheus.Collector, ready func() error) {
	m.reg.MustRegister(collectors...)
	if ready != nil {
		m.health.Add(name, ready)
	}
}

// expect names the components the process is about to start, in the
// order /readyz lists them: each fails /readyz as starting until add
// gives it its check.
func (m *monitor) expect(names ...string) { m.health.Expect(names...) }

// controllerReady is a controller replica's readiness: it knows its Raft
// leader (a replica that lost its quorum does not).
func controllerReady(c *controller.Controller) func() error {
	return func() error {
		if c.Leader() == "" {
			return errors.New("controller: no Raft leader known")
		}
		return nil
	}
}

// Close stops the listener (idempotent).
func (m *monitor) Close() error {
	if m == nil || m.srv == nil {
		return nil
	}
	return m.srv.Close()
}
