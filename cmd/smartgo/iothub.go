package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/broker"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/twin"
)

// localTwin adapts broker.Twins to twincli.LocalBroker.
type localTwin struct{ tw *broker.Twins }

func (l localTwin) InvokeLocal(ctx context.Context, shard int32, req *twin.Request) (twin.Reply, error) {
	rep, err := l.tw.InvokeLocal(ctx, shard, req)
	switch {
	case err == nil:
		return rep, nil
	case errors.Is(err, broker.ErrTwinNotOwner), errors.Is(err, broker.ErrTwinUnavailable):
		return rep, fmt.Errorf("%w: %w", twincli.ErrUnavailable, err)
	default:
		return rep, fmt.Errorf("%w: %w", twincli.ErrFailed, err)
	}
}

func (l localTwin) WatchLocal(action twin.WatchAction, keys []string, sink twin.Sink) uint64 {
	return l.tw.WatchLocal(action, keys, sink)
}

// iothubOptions maps [iothub] (and the bridge's registries and TLS files)
// onto the hub's options.
func iothubOptions(h conf.IoTHub, b conf.Bridge, log *slog.Logger) iothub.Options {
	o := iothub.Options{HostName: h.HostName, DeviceAuth: h.DeviceAuth, X509CAFile: h.X509CAFile,
		TLSCertFile: h.TLSCert, TLSKeyFile: h.TLSKey, EventsTopic: h.EventsTopic, RPCTopic: h.RPCTopic, FeedbackTopic: h.FeedbackTopic,
		FeedbackLockDuration: h.FeedbackLock.D(),
		MethodAckTimeout:     h.MethodAckTimeout.D(), MaxMethodTimeout: h.MaxMethodTimeout.D(), C2DTTL: h.C2DTTL.D(),
		C2DMaxTTL: h.C2DMaxTTL.D(), C2DMaxSize: int(h.C2DMaxSize.Bytes()), C2DMaxQueueDepth: h.C2DMaxQueueDepth, TwinRate: h.TwinRate,
		RequestTimeout: h.RequestTimeout.D(), StartTimeout: h.StartTimeout.D(), MaxBody: h.MaxBody.Bytes(),
		Twins: twincli.Options{Registries: b.Registries, RouteRefresh: h.RouteRefresh.D(),
			RequestTimeout: h.RequestTimeout.D(), WatchCheck: h.WatchCheck.D()},
		Logger: log.With("component", "iothub")}
	if h.TwinRate == 0 {
		o.TwinRate = -1 // unlimited (0 would mean the default)
	}
	if o.TLSCertFile == "" {
		o.TLSCertFile, o.TLSKeyFile = b.TLSCert, b.TLSKey
	}
	if h.HTTPSListen != "" {
		o.HTTPSListen = []string{h.HTTPSListen}
	}
	if h.AMQPSListen != "" {
		o.AMQPSListen = []string{h.AMQPSListen}
	}
	for _, p := range h.Policies {
		o.Policies = append(o.Policies, iothub.Policy{Name: p.Name, Key: p.Key, Permissions: p.Permissions})
	}
	return o
}

// newHub builds the IoT hub of a bridge node when [iothub] enables it and
// puts its hooks into the node's options; nil when disabled. local are
// the twin shards of brokers in this process, called directly.
func newHub(f conf.File, mo *mqtt.Options, bo *bridge.Options, local map[string]twincli.LocalBroker, log *slog.Logger) (*iothub.Hub, error) {
	if !f.IoTHub.Enabled {
		return nil, nil
	}
	o := iothubOptions(f.IoTHub, f.Bridge, log)
	o.Twins.Local = local
	h, err := iothub.New(o)
	if err != nil {
		return nil, fmt.Errorf("iothub options: %w", err)
	}
	if err := h.Configure(mo, bo); err != nil {
		_ = h.Close()
		return nil, err
	}
	return h, nil
}

func closeHub(h *iothub.Hub) {
	if h != nil {
		_ = h.Close()
	}
}
