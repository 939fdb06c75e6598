package iothub

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	tw "github.com/smartgo/smartgo/twin"
)

// Defaults of Options.
const (
	DefaultEventsTopic   = "IOTHUB_EVENTS"
	DefaultRPCTopic      = "IOTHUB_RPC"
	DefaultFeedbackTopic = "IOTHUB_FEEDBACK"
	// DefaultFeedbackLockDuration is IoT Hub's lock duration of its
	// feedback queue.
	DefaultFeedbackLockDuration = time.Minute
	DefaultMethodAckTimeout     = 3 * time.Second
	DefaultMaxMethodTimeout     = 300 * time.Second
	DefaultMethodTimeout        = 30 * time.Second
	DefaultC2DTTL               = time.Hour
	DefaultC2DMaxTTL            = 48 * time.Hour
	DefaultC2DMaxSize           = 64 << 10
	// DefaultC2DMaxQueueDepth is IoT Hub's limit of cloud-to-device
	// messages outstanding per device.
	DefaultC2DMaxQueueDepth = 50
	DefaultTwinRate         = 100
	DefaultRequestTimeout   = 10 * time.Second
	DefaultStartTimeout     = 30 * time.Second
	DefaultMaxBody          = 256 << 10
)

// MaxMethodPayload is IoT Hub's limit on a direct method request's JSON
// payload (128 KB): a larger one is refused with 413
// RequestEntityTooLarge before it reaches the device. It bounds the
// device's answer too (ErrResponseTooLarge, 413 MessageTooLarge).
const MaxMethodPayload = 128 << 10

// Device authentication modes (Options.DeviceAuth).
const (
	// AuthRegistry checks devices against the identity registry: a SAS
	// token signed with the identity's key (or a policy's with
	// deviceConnect), or a registered client certificate.
	AuthRegistry = "registry"
	// AuthNone is development mode: any device may connect as any
	// identity without credentials, and identities are registered (with
	// authentication type "none") when they first connect.
	AuthNone = "none"
)

// Permissions of a shared access policy.
const (
	PermRegistryRead   = "registryRead"
	PermRegistryWrite  = "registryWrite"
	PermServiceConnect = "serviceConnect"
	PermDeviceConnect  = "deviceConnect"
)

var allPerms = []string{PermRegistryRead, PermRegistryWrite, PermServiceConnect, PermDeviceConnect}

// Policy is a shared access policy: back ends (and devices, with
// deviceConnect) sign SAS tokens with its key and name it in skn.
type Policy struct {
	Name        string
	Key         string // base64
	Permissions []string
}

// has reports whether the policy grants perm (registryWrite implies
// registryRead).
func (p *Policy) has(perm string) bool {
	return slices.Contains(p.Permissions, perm) || perm == PermRegistryRead && slices.Contains(p.Permissions, PermRegistryWrite)
}

// Options configures a Hub.
type Options struct {
	// HostName is the hub's host name: device user names start with it,
	// every SAS token's resource names it, and the TLS certificates must
	// carry it. Empty accepts any host that a device's user name and
	// token agree on (and any host for back-end tokens): development only.
	HostName string
	// DeviceAuth is AuthRegistry (default) or AuthNone.
	DeviceAuth string
	// Policies are the shared access policies of the back end.
	Policies []Policy
	// X509CAFile holds the PEM CA certificates trusted for identities of
	// authentication type certificateAuthority ("" trusts none).
	X509CAFile string

	// HTTPSListen are the addresses of the back-end HTTPS API (IoT Hub's
	// REST shape); none turns it off. The service SDKs always use 443.
	HTTPSListen []string
	// AMQPSListen are the addresses of the AMQP 1.0 endpoint over TLS
	// (amqp.go), where the service SDKs send cloud-to-device messages;
	// none turns it off. The SDKs always use 5671.
	AMQPSListen []string
	// TLSCertFile and TLSKeyFile are the certificate of the API and the
	// AMQP endpoint (TLSConfig instead, when set).
	TLSCertFile string
	TLSKeyFile  string
	TLSConfig   *tls.Config

	// EventsTopic takes device and module telemetry (an ingress-only
	// route). Default IOTHUB_EVENTS.
	EventsTopic string
	// RPCTopic carries direct-method calls between nodes. Default
	// IOTHUB_RPC.
	RPCTopic string
	// FeedbackTopic holds the delivery feedback of cloud-to-device
	// messages sent with an ack request, until a back end takes it from
	// the AMQP endpoint's feedback link. Default IOTHUB_FEEDBACK.
	FeedbackTopic string
	// FeedbackLockDuration is how long a feedback batch sent to a
	// receiver may stay unsettled (neither accepted nor rejected) before
	// the hub takes it back and sends it again, as IoT Hub's feedback
	// queue lock duration. Default 1 min.
	FeedbackLockDuration time.Duration
	// MethodAckTimeout is how long an invoking node waits for the node
	// holding a device the registry records connected to take the call
	// before answering 404 (device not online); a device recorded
	// disconnected gets 404 at once. Default 3 s.
	MethodAckTimeout time.Duration
	// MaxMethodTimeout caps a call's response and connect timeouts.
	// Default 300 s.
	MaxMethodTimeout time.Duration
	// C2DTTL is a cloud-to-device message's time to live when the sender
	// gives none; C2DMaxTTL caps it. Defaults 1 h and 48 h.
	C2DTTL    time.Duration
	C2DMaxTTL time.Duration
	// C2DMaxSize bounds a cloud-to-device message body. Default 64 KiB.
	C2DMaxSize int
	// C2DMaxQueueDepth bounds the cloud-to-device messages a registered
	// device holds, sent and neither acknowledged nor expired: one more is
	// refused with 403 DeviceMaximumQueueDepthExceeded. Default 50 (IoT
	// Hub's); at most twin.MaxC2DQueueDepth.
	C2DMaxQueueDepth int
	// TwinRate is the twin requests (GET, PATCH) one device may send per
	// second, with a burst of as many; beyond it the answer is 429.
	// Default 100; negative: unlimited.
	TwinRate int
	// RequestTimeout bounds a call to the twin shards. Default 10 s.
	RequestTimeout time.Duration
	// StartTimeout bounds Start: the RPC topic's creation and route and
	// its consumer, which wait while the registries or brokers are not
	// there yet. Default 30 s.
	StartTimeout time.Duration
	// MaxBody bounds an HTTPS request body. Default 256 KiB.
	MaxBody int64

	// Twins reaches the identity registry and twins (its OnDesired is
	// set by the hub; Registries are the bridge's when empty).
	Twins twincli.Options

	Logger *slog.Logger
}

var topicRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,127}$`)

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch o.DeviceAuth {
	case "", AuthRegistry, AuthNone:
	default:
		return bad("device auth %q (want %q or %q)", o.DeviceAuth, AuthRegistry, AuthNone)
	}
	if strings.ContainsAny(o.HostName, "/ ?&") {
		return bad("host name %q", o.HostName)
	}
	seen := map[string]bool{}
	for i, p := range o.Policies {
		if p.Name == "" || strings.ContainsAny(p.Name, "&= ") || seen[p.Name] {
			return bad("policy %d: name %q empty, repeated or holding '&', '=' or a space", i, p.Name)
		}
		seen[p.Name] = true
		if k, err := base64.StdEncoding.DecodeString(p.Key); err != nil || len(k) < 16 {
			return bad("policy %s: key must be base64 of at least 16 bytes", p.Name)
		}
		for _, perm := range p.Permissions {
			if !slices.Contains(allPerms, perm) {
				return bad("policy %s: permission %q (want %s)", p.Name, perm, strings.Join(allPerms, ", "))
			}
		}
	}
	if len(o.HTTPSListen) > 0 && o.TLSConfig == nil && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		return bad("HTTPS listener without certificate and key")
	}
	if len(o.AMQPSListen) > 0 && o.TLSConfig == nil && (o.TLSCertFile == "" || o.TLSKeyFile == "") {
		return bad("AMQPS listener without certificate and key")
	}
	for _, t := range []string{o.EventsTopic, o.RPCTopic, o.FeedbackTopic} {
		if t != "" && !topicRE.MatchString(t) {
			return bad("broker topic %q", t)
		}
	}
	if o.MethodAckTimeout < 0 || o.FeedbackLockDuration < 0 || o.MaxMethodTimeout < 0 || o.C2DTTL < 0 || o.C2DMaxTTL < 0 || o.C2DMaxSize < 0 ||
		o.RequestTimeout < 0 || o.StartTimeout < 0 || o.MaxBody < 0 || o.C2DMaxQueueDepth < 0 {
		return bad("negative limit")
	}
	if o.C2DMaxQueueDepth > tw.MaxC2DQueueDepth {
		return bad("C2DMaxQueueDepth %d over %d", o.C2DMaxQueueDepth, tw.MaxC2DQueueDepth)
	}
	return nil
}

// DefaultOptions returns options with every default filled in (the
// registry client's too), reaching the registries given.
func DefaultOptions(registries ...string) Options {
	o := Options{Twins: twincli.Options{Registries: registries, RouteRefresh: twincli.DefaultRouteRefresh,
		RequestTimeout: twincli.DefaultRequestTimeout, WatchCheck: twincli.DefaultWatchCheck}}
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.DeviceAuth == "" {
		o.DeviceAuth = AuthRegistry
	}
	if o.EventsTopic == "" {
		o.EventsTopic = DefaultEventsTopic
	}
	if o.RPCTopic == "" {
		o.RPCTopic = DefaultRPCTopic
	}
	if o.FeedbackTopic == "" {
		o.FeedbackTopic = DefaultFeedbackTopic
	}
	if o.MethodAckTimeout == 0 {
		o.MethodAckTimeout = DefaultMethodAckTimeout
	}
	if o.FeedbackLockDuration == 0 {
		o.FeedbackLockDuration = DefaultFeedbackLockDuration
	}
	if o.MaxMethodTimeout == 0 {
		o.MaxMethodTimeout = DefaultMaxMethodTimeout
	}
	if o.C2DTTL == 0 {
		o.C2DTTL = DefaultC2DTTL
	}
	if o.C2DMaxTTL == 0 {
		o.C2DMaxTTL = DefaultC2DMaxTTL
	}
	if o.C2DMaxQueueDepth == 0 {
		o.C2DMaxQueueDepth = DefaultC2DMaxQueueDepth
	}
	if o.C2DMaxSize == 0 {
		o.C2DMaxSize = DefaultC2DMaxSize
	}
	if o.TwinRate == 0 {
		o.TwinRate = DefaultTwinRate
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}
