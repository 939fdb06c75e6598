package broker

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// Broker configuration over the wire: GET_BROKER_CONFIG (26, mqadmin
// getBrokerConfig and exportConfigs) and UPDATE_BROKER_CONFIG (25, mqadmin
// updateBrokerConfig), as properties text under RocketMQ's key names.
//
// Three keys change at run time, at once and until restart (the
// configuration file stays what a start uses):
//
//	brokerPermission             the broker's read/write bits (6 = rw, 4 = read only, 2 = write only)
//	slaveReadEnable              consumers far behind are sent to a slave
//	autoCreateSubscriptionGroup  unknown groups are created on first use
//
// Any other key is refused with SYSTEM_ERROR naming it (RocketMQ would
// store it and use it after a restart; SmartGo's configuration is its
// TOML file); nothing changes unless every pair is valid.

// Keys UPDATE_BROKER_CONFIG may change.
const (
	cfgBrokerPermission = "brokerPermission"
	cfgSlaveReadEnable  = "slaveReadEnable"
	cfgAutoCreateGroup  = "autoCreateSubscriptionGroup"
	cfgAutoCreateTopic  = "autoCreateTopicEnable"
)

// BrokerConfig returns the configuration GET_BROKER_CONFIG reports.
func (b *Broker) BrokerConfig() map[string]string {
	o := b.opts
	so := b.store.Options()
	fmtBool := strconv.FormatBool
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	flush := "ASYNC_FLUSH"
	if so.FlushMode == store.FlushSync {
		flush = "SYNC_FLUSH"
	}
	_, port, _ := net.SplitHostPort(b.addr)
	c := map[string]string{
		"brokerClusterName":             o.ClusterName,
		"brokerName":                    o.BrokerName,
		"brokerId":                      strconv.FormatInt(o.BrokerID, 10),
		"brokerRole":                    o.Role.String(),
		"brokerIP1":                     b.storeHost.Addr().String(),
		"listenPort":                    port,
		"namesrvAddr":                   strings.Join(o.Registries, ";"),
		"registerNameServerPeriod":      ms(o.RegisterInterval),
		cfgBrokerPermission:             strconv.Itoa(int(b.perm.Load())),
		cfgAutoCreateTopic:              fmtBool(b.topics.AutoCreate()),
		cfgAutoCreateGroup:              fmtBool(b.groups.AutoCreate()),
		"defaultTopicQueueNums":         strconv.Itoa(int(o.DefaultTopicQueues)),
		"longPollingEnable":             fmtBool(o.LongPolling),
		"shortPollingTimeMills":         ms(o.ShortPollingHold),
		cfgSlaveReadEnable:              fmtBool(b.slaveRead.Load()),
		"messageDelayLevel":             delayLevelText(o.DelayLevels),
		"storePathRootDir":              so.Root,
		"storePathCommitLog":            filepath.Join(so.Root, "commitlog"),
		"flushDiskType":                 flush,
		"maxMessageSize":                strconv.Itoa(so.MaxMessageSize),
		"mappedFileSizeCommitLog":       strconv.FormatInt(so.SegmentSize, 10),
		"mappedFileSizeConsumeQueue":    strconv.Itoa(so.CQEntriesPerFile * 20),
		"fileReservedTime":              strconv.FormatInt(int64(so.FileReservedTime/time.Hour), 10),
		"deleteWhen":                    so.DeleteWhen,
		"diskMaxUsedSpaceRatio":         strconv.Itoa(int(so.DiskMaxUsedRatio * 100)),
		"syncFlushTimeout":              ms(so.SyncFlushTimeout),
		"flushIntervalCommitLog":        ms(so.FlushInterval),
		"flushIntervalConsumeQueue":     ms(so.LogicFlushInterval),
		"checkCRCOnRecover":             fmtBool(so.CheckCRCOnRecover),
		"transientStorePoolEnable":      "false",
		"enablePropertyFilter":          fmtBool(o.EnablePropertyFilter),
		"rejectTransactionMessage":      "false",
		"filterServerNums":              "0",
		"msgTraceTopicName":             TraceTopic,
		"traceTopicEnable":              "true",
		"traceOn":                       "true",
		"useTLS":                        "false", // remoting has no TLS
		"clientCallbackExecutorThreads": strconv.Itoa(runtime.NumCPU()),
	}
	if _, ha, err := net.SplitHostPort(b.haAdvertised); err == nil {
		c["haListenPort"] = ha
	}
	return c
}

// delayLevelText writes delay levels as RocketMQ's messageDelayLevel
// ("1s 5s 10s 30s 1m ... 2h").
func delayLevelText(levels []time.Duration) string {
	parts := make([]string, len(levels))
	for i, d := range levels {
		switch {
		case d >= time.Hour && d%time.Hour == 0:
			parts[i] = strconv.FormatInt(int64(d/time.Hour), 10) + "h"
		case d >= time.Minute && d%time.Minute == 0:
			parts[i] = strconv.FormatInt(int64(d/time.Minute), 10) + "m"
		case d >= time.Second && d%time.Second == 0:
			parts[i] = strconv.FormatInt(int64(d/time.Second), 10) + "s"
		default:
			parts[i] = d.String()
		}
	}
	return strings.Join(parts, " ")
}

// UpdateBrokerConfig applies UPDATE_BROKER_CONFIG's pairs: all or nothing.
func (b *Broker) UpdateBrokerConfig(props map[string]string) error {
	perm, slaveRead, autoGroup, autoTopic := b.perm.Load(), b.slaveRead.Load(), b.groups.AutoCreate(), b.topics.AutoCreate()
	var fixed, unknown []string
	known := b.BrokerConfig()
	for k, v := range props {
		var err error
		switch k {
		case cfgBrokerPermission:
			var n int64
			n, err = strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err == nil && int32(n)&^PermRW != 0 {
				err = fmt.Errorf("a broker's permission is 6 (read and write), 4 (read) or 2 (write)")
			}
			perm = int32(n)
		case cfgSlaveReadEnable:
			slaveRead, err = strconv.ParseBool(strings.TrimSpace(v))
		case cfgAutoCreateGroup:
			autoGroup, err = strconv.ParseBool(strings.TrimSpace(v))
		case cfgAutoCreateTopic:
			autoTopic, err = strconv.ParseBool(strings.TrimSpace(v))
		default:
			if _, ok := known[k]; ok {
				fixed = append(fixed, k)
			} else {
				unknown = append(unknown, k)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrBadOptions, k, v, err)
		}
	}
	sort.Strings(fixed)
	sort.Strings(unknown)
	switch {
	case len(unknown) > 0:
		return fmt.Errorf("%w: unknown keys %s", ErrBadOptions, strings.Join(unknown, ", "))
	case len(fixed) > 0:
		return fmt.Errorf("%w: %s cannot change while the broker runs (only %s, %s, %s and %s can); set them in its configuration file",
			ErrBadOptions, strings.Join(fixed, ", "), cfgAutoCreateGroup, cfgAutoCreateTopic, cfgBrokerPermission, cfgSlaveReadEnable)
	}
	permChanged := b.perm.Swap(perm) != perm
	b.slaveRead.Store(slaveRead)
	b.groups.SetAutoCreate(autoGroup)
	topicsChanged, err := b.topics.SetAutoCreate(autoTopic)
	b.cfgVersion.bump(b.now())
	if permChanged || topicsChanged {
		b.triggerRegister() // the registries publish the new permission or TBW102's route
	}
	if err != nil {
		return fmt.Errorf("broker: switch topic auto-creation: %w", err)
	}
	return nil
}

// processGetBrokerConfig serves GET_BROKER_CONFIG.
func (b *Broker) processGetBrokerConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	v, err := protocol.EncodeJSON(b.cfgVersion.get())
	if err != nil {
		return nil, err
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.GetBrokerConfigResponseHeader{Version: string(v)})
	resp.Body = protocol.EncodeProperties(b.BrokerConfig())
	return resp, nil
}

// processUpdateBrokerConfig serves UPDATE_BROKER_CONFIG.
func (b *Broker) processUpdateBrokerConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	props, err := protocol.DecodeProperties(req.Body)
	if err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if err := b.UpdateBrokerConfig(props); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	b.log.Info("broker configuration updated", "config", props, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}
