package registry

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// Runtime configuration: GET_NAMESRV_CONFIG (319) and UPDATE_NAMESRV_CONFIG
// (318), which mqadmin getNamesrvConfig and updateNamesrvConfig send.
//
// The body is properties text (protocol.EncodeProperties). The registry
// reports:
//
//	key                              meaning                                  update
//	listenPort                       the port it listens on                   no
//	kvConfigPath                     the KV config file ("" = memory only)    no (RocketMQ forbids it too)
//	serverChannelMaxIdleTimeSeconds  idle connections are closed after this   no (set at start)
//	maxFrameSize                     largest accepted frame, bytes            no (set at start)
//	scanInterval                     period of the scan for silent brokers    yes
//	brokerExpiry                     a broker silent this long is removed     yes
//
// Durations are written as Go durations ("10s", "2m0s") and read as Go
// durations or as a bare number of milliseconds. An update applies at once
// (the next scan uses it) and lasts until the registry restarts: the
// configuration file stays the source of what a start uses. An update
// naming a fixed key is refused with NO_PERMISSION, as RocketMQ refuses
// its black-listed keys; an unknown key or a bad value with SYSTEM_ERROR
// naming it; nothing is changed unless every pair is valid.

// runtimeOptions are the options an update may change; the scan loop and
// scan read them on every round.
type runtimeOptions struct {
	scanInterval atomic.Int64 // time.Duration
	brokerExpiry atomic.Int64 // time.Duration
}

// Property keys of the registry configuration.
const (
	propListenPort   = "listenPort"
	propKVConfigPath = "kvConfigPath"
	propIdleSeconds  = "serverChannelMaxIdleTimeSeconds"
	propMaxFrameSize = "maxFrameSize"
	propScanInterval = "scanInterval"
	propBrokerExpiry = "brokerExpiry"
)

// Config returns the registry's configuration as GET_NAMESRV_CONFIG
// reports it.
func (s *Server) Config() map[string]string {
	port := ""
	if a, ok := s.Addr().(*net.TCPAddr); ok {
		port = strconv.Itoa(a.Port)
	}
	return map[string]string{
		propListenPort:   port,
		propKVConfigPath: s.opts.KVConfigPath,
		propIdleSeconds:  strconv.FormatInt(int64(s.opts.IdleTimeout/time.Second), 10),
		propMaxFrameSize: strconv.FormatInt(s.opts.MaxFrameSize, 10),
		propScanInterval: time.Duration(s.rt.scanInterval.Load()).String(),
		propBrokerExpiry: time.Duration(s.rt.brokerExpiry.Load()).String(),
	}
}

// errFixedKey marks an update of a key that cannot change at run time.
type errFixedKey struct{ keys []string }

func (e errFixedKey) Error() string {
	return "Can not update config in black list: " + strings.Join(e.keys, ", ")
}

// UpdateConfig applies UPDATE_NAMESRV_CONFIG's pairs: all or nothing.
func (s *Server) UpdateConfig(props map[string]string) error {
	var fixed, unknown []string
	scan := time.Duration(s.rt.scanInterval.Load())
	expiry := time.Duration(s.rt.brokerExpiry.Load())
	for k, v := range props {
		switch k {
		case propListenPort, propKVConfigPath, propIdleSeconds, propMaxFrameSize:
			fixed = append(fixed, k)
		case propScanInterval, propBrokerExpiry:
			d, err := parseConfigDuration(v)
			if err != nil {
				return fmt.Errorf("%w: %s=%q: %v", ErrBadOptions, k, v, err)
			}
			if k == propScanInterval {
				scan = d
			} else {
				expiry = d
			}
		default:
			unknown = append(unknown, k)
		}
	}
	if len(fixed) > 0 {
		sort.Strings(fixed)
		return errFixedKey{fixed}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("%w: unknown keys %s (known: %s, %s, %s, %s, %s, %s)", ErrBadOptions, strings.Join(unknown, ", "),
			propBrokerExpiry, propIdleSeconds, propKVConfigPath, propListenPort, propMaxFrameSize, propScanInterval)
	}
	if scan > expiry {
		return fmt.Errorf("%w: scanInterval %v longer than brokerExpiry %v", ErrBadOptions, scan, expiry)
	}
	s.rt.scanInterval.Store(int64(scan))
	s.rt.brokerExpiry.Store(int64(expiry))
	select {
	case s.rescan <- struct{}{}: // the scan loop takes the new period now
	default:
	}
	return nil
}

func parseConfigDuration(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	var d time.Duration
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(ms) * time.Millisecond
	} else if d, err = time.ParseDuration(v); err != nil {
		return 0, fmt.Errorf("not a duration (\"30s\") or a number of milliseconds")
	}
	if d < time.Second || d > 24*time.Hour {
		return 0, fmt.Errorf("%v outside [1s, 24h]", d)
	}
	return d, nil
}

func (s *Server) getConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Body = protocol.EncodeProperties(s.Config())
	return resp, nil
}

func (s *Server) updateConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	props, err := protocol.DecodeProperties(req.Body)
	if err != nil {
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	if err := s.UpdateConfig(props); err != nil {
		if _, ok := err.(errFixedKey); ok {
			return errResponse(protocol.NoPermission, "%v", err), nil
		}
		return errResponse(protocol.SystemError, "%v", err), nil
	}
	s.log.Info("registry: configuration updated", "peer", c.RemoteAddr().String(), "config", props)
	return protocol.NewResponse(protocol.Success, ""), nil
}
