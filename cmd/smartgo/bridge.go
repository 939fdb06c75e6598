package main

import (
	"context"
	"io"
	"log/slog"
	"net"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/mqtt"
)

func init() {
	register(command{name: "bridge", summary: "an MQTT 3.1.1/5 bridge node, port 1883 by default (and AMQP 0-9-1, 5672)", server: true, run: runBridge})
}

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var cf configFlags
	fs := newCmdFlags("bridge", "[-c FILE] [-listen ADDR] [-set key=value ...]", `
Runs an MQTT 3.1.1/5 bridge node: devices connect to it, their publishes are
stored in the brokers (routed by [[bridge.route]] rules), and messages for
devices are consumed from the brokers and delivered to their sessions.
Sessions and retained messages live in the cluster (MQTT_SESSION,
MQTT_RETAINED), so any node can serve any device. With amqp.listen set
(0.0.0.0:5672 by default) it also serves AMQP 0-9-1 for RabbitMQ's
clients, durable queues stored in the brokers. Reads [log], [bridge],
[statestore], [iothub] and [amqp].
Stops cleanly on SIGINT or SIGTERM (persistent sessions saved).`, stdout, stderr)
	fs.example("smartgo bridge -registries 127.0.0.1:9876",
		"smartgo bridge -c conf/bridge.toml -listen 0.0.0.0:1884",
		"smartgo bridge -set 'bridge.registries=[\"10.0.0.1:9876\",\"10.0.0.2:9876\"]'")
	cf.register(fs)
	cf.stringFlag(fs, "listen", "bridge.listen", "MQTT listen `address`")
	cf.stringFlag(fs, "registries", "bridge.registries", "registry `addresses`: a,b or [\"a\",\"b\"]")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	f, code, ok := loadOrExit(&cf, stderr, "bridge")
	if !ok {
		return code
	}
	log := newLogger(f.Log, stderr)
	logStart(log, "bridge")
	mon, err := startMonitor(f.Metrics, log)
	if err != nil {
		log.Error("metrics failed to start", "err", err)
		return exitFailure
	}
	defer mon.Close()
	mon.expect("bridge") // /readyz names it while it waits for the brokers
	if f.AMQP.Listen != "" {
		mon.expect("amqp")
	}
	b, err := startBridge(ctx, f, nil, log)
	if err != nil {
		return startFailed(ctx, log, "bridge", err)
	}
	b.monitor(mon)
	<-ctx.Done()
	log.Info("shutting down", "reason", "signal")
	if err := b.Close(); err != nil {
		log.Error("bridge shutdown", "err", err)
		return exitFailure
	}
	return exitOK
}

// bridgeOptions maps [bridge] onto the MQTT server and bridge options.
func bridgeOptions(c conf.Bridge, log *slog.Logger) (mqtt.Options, bridge.Options) {
	mo := mqtt.DefaultOptions()
	mo.Listen = nil
	if c.Listen != "" {
		mo.Listen = []string{c.Listen}
	}
	if c.TLSListen != "" {
		mo.TLSListen = []string{c.TLSListen}
	}
	mo.TLSCertFile, mo.TLSKeyFile = c.TLSCert, c.TLSKey
	mo.MaxPacketSize = int(c.MaxPacketSize.Bytes())
	mo.ReceiveMaximum = c.ReceiveMaximum
	mo.KeepAliveMax = c.MaxKeepAlive.D()
	mo.SessionExpiryMax = c.SessionExpiry.D()
	mo.SysInterval = c.SysInterval.D()
	if mo.SysInterval == 0 {
		mo.SysInterval = -1 // sys_interval = "0s": no $SYS tree
	}
	mo.CredentialsFile = c.CredentialsFile
	mo.ACLFile = c.ACLFile
	mo.AllowAnonymous = c.AllowAnonymous
	mo.TopicAliasMaximum = c.TopicAliasMaximum
	mo.MaxClientIDLen = c.MaxClientIDLen // bridge.New caps it at what a record holds
	mo.MaxIdentityLen = c.MaxIdentityLen // and this one
	if c.TopicAliasMaximum == 0 {
		mo.TopicAliasMaximum = -1 // none (0 would mean the default)
	}
	mo.MaxQueuedMessages = c.MaxQueuedMessages
	mo.MaxOutbound = int(c.MaxOutbound.Bytes())
	mo.SlowReaderTimeout = c.SlowReaderTimeout.D()
	if c.SlowReaderTimeout.D() == 0 {
		mo.SlowReaderTimeout = -1 // no time limit (0 would mean the default)
	}
	mo.MaxInboundMemory = c.MaxInboundMemory.Bytes()
	mo.InboundStallTimeout = c.InboundStall.D()
	mo.ConnectTimeout = c.ConnectTimeout.D()
	mo.SessionLoadTimeout = c.SessionLoadTimeout.D()
	mo.Workers = c.Workers
	mo.Pollers = c.Pollers
	mo.PollLinger = c.PollLinger.D()
	if c.PollLinger.D() == 0 {
		mo.PollLinger = -1 // never (0 would mean the default)
	}
	mo.Logger = log.With("component", "mqtt")
	bo := bridge.DefaultOptions(c.Registries...)
	bo.DefaultTopic = c.DefaultTopic
	bo.EgressTopic = c.EgressTopic
	bo.SessionTopic, bo.RetainedTopic = c.SessionTopic, c.RetainedTopic
	bo.NodeID = c.NodeID
	bo.MaxOfflineMessages = c.MaxOfflineMessages
	bo.TopicQueues = int32(c.TopicQueues)
	bo.StartTimeout = c.StartTimeout.D()
	bo.SendTimeout = c.SendTimeout.D()
	bo.HandoffTimeout = c.HandoffTimeout.D()
	bo.ShareRefresh = c.ShareRefresh.D()
	bo.CheckpointInterval = c.CheckpointInterval.D()
	bo.WillClaimGrace = c.WillClaimGrace.D()
	bo.RefreshAge = c.RefreshAge.D()
	bo.HeartbeatInterval = c.HeartbeatEvery.D()
	bo.Version = version
	mo.Version = currentBuild().short()
	for _, r := range c.Routes {
		bo.Routes = append(bo.Routes, bridge.Route{Filter: r.Filter, Topic: r.Topic, IngressOnly: r.IngressOnly})
	}
	bo.Logger = log.With("component", "bridge")
	return mo, bo
}

// localAddr turns a listener address into one reachable on this host.
func localAddr(a net.Addr) string {
	_, port, _ := net.SplitHostPort(a.String())
	return net.JoinHostPort("127.0.0.1", port)
}
