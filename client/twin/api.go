package twin

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	tw "github.com/smartgo/smartgo/twin"
)

// Twin is a twin document as the engine returned it.
type Twin struct {
	DeviceID string
	ModuleID string // "" for a device twin
	Etag     string // the twin etag, for If-Match
	Version  int64  // the twin version
	JSON     []byte // the full document (identity fields, tags, properties with $metadata and $version)
}

func twinOf(deviceID, moduleID string, rep *Reply) *Twin {
	return &Twin{DeviceID: deviceID, ModuleID: moduleID, Etag: rep.Etag, Version: rep.Version, JSON: rep.Body}
}

// ---- identities ----

// PutDevice creates or updates a device identity (mode: PutCreate fails
// with ErrExists when it exists, PutUpdate with ErrNotFound when it does
// not, PutUpsert does either). On an update, ifMatch ("" none, "*" any,
// or the identity etag, quoted or not) must match. Status, StatusReason,
// Authentication and Capabilities are taken from d; SAS keys left empty
// are generated on create and kept on update. It returns the identity as
// stored. A device it created gets its cloud-to-device session prepared
// first (Options.PrepareC2D).
func (c *Client) PutDevice(ctx context.Context, d *Device, mode PutMode, ifMatch string) (*Device, error) {
	body, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("twin: device: %w", err)
	}
	rep, err := c.Do(ctx, &Request{Op: tw.OpPutDevice, DeviceID: d.DeviceID, Mode: mode, IfMatch: ifMatch, Body: body})
	if err != nil {
		return nil, err
	}
	got, err := decodeAs[Device](rep.Body)
	if err == nil && mode != PutUpdate && tw.CreatedIdentity(rep.Etag) {
		c.prepareC2D(ctx, got.DeviceID)
	}
	return got, err
}

// CreateDevice creates a device identity (ErrExists when it exists).
func (c *Client) CreateDevice(ctx context.Context, d *Device) (*Device, error) {
	return c.PutDevice(ctx, d, PutCreate, "")
}

// UpdateDevice updates a device identity (ErrNotFound when it does not
// exist, ErrPrecondition when ifMatch does not match).
func (c *Client) UpdateDevice(ctx context.Context, d *Device, ifMatch string) (*Device, error) {
	return c.PutDevice(ctx, d, PutUpdate, ifMatch)
}

// GetDevice reads a device identity, with its keys: a front end checks SAS
// tokens against them and refuses a disabled device.
func (c *Client) GetDevice(ctx context.Context, deviceID string) (*Device, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpGetDevice, DeviceID: deviceID})
	if !usable(err) {
		return nil, err
	}
	return withStale(decodeAs[Device](rep.Body))(err)
}

// DeleteDevice deletes a device with its modules and twins; ifMatch as for
// PutDevice.
func (c *Client) DeleteDevice(ctx context.Context, deviceID, ifMatch string) error {
	_, err := c.Do(ctx, &Request{Op: tw.OpDeleteDevice, DeviceID: deviceID, IfMatch: ifMatch})
	return err
}

// ListDevices returns a page of device identities (at most pageSize, 0:
// the broker's page size) and the continuation token of the next page (""
// after the last one). Devices come shard by shard, in id order within a
// shard.
func (c *Client) ListDevices(ctx context.Context, pageSize int, continuation string) ([]Device, string, error) {
	items, next, err := c.pages(ctx, &Request{Op: tw.OpListDevices}, pageSize, continuation)
	if !usable(err) {
		return nil, "", err
	}
	out := make([]Device, 0, len(items))
	for _, it := range items {
		d, err := decodeAs[Device](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, *d)
	}
	return out, next, err
}

// PutModule creates or updates a module identity of m.DeviceID (which
// must exist); modes and ifMatch as for PutDevice. ManagedBy and
// Authentication are taken from m.
func (c *Client) PutModule(ctx context.Context, m *Module, mode PutMode, ifMatch string) (*Module, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("twin: module: %w", err)
	}
	rep, err := c.Do(ctx, &Request{Op: tw.OpPutModule, DeviceID: m.DeviceID, ModuleID: m.ModuleID, Mode: mode, IfMatch: ifMatch, Body: body})
	if err != nil {
		return nil, err
	}
	return decodeAs[Module](rep.Body)
}

// CreateModule creates a module identity (ErrExists when it exists,
// ErrQuota when the device has the most modules it may).
func (c *Client) CreateModule(ctx context.Context, m *Module) (*Module, error) {
	return c.PutModule(ctx, m, PutCreate, "")
}

// GetModule reads a module identity.
func (c *Client) GetModule(ctx context.Context, deviceID, moduleID string) (*Module, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpGetModule, DeviceID: deviceID, ModuleID: moduleID})
	if !usable(err) {
		return nil, err
	}
	return withStale(decodeAs[Module](rep.Body))(err)
}

// DeleteModule deletes a module identity and its twin.
func (c *Client) DeleteModule(ctx context.Context, deviceID, moduleID, ifMatch string) error {
	_, err := c.Do(ctx, &Request{Op: tw.OpDeleteModule, DeviceID: deviceID, ModuleID: moduleID, IfMatch: ifMatch})
	return err
}

// ListModules returns a device's module identities.
func (c *Client) ListModules(ctx context.Context, deviceID string) ([]Module, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpListModules, DeviceID: deviceID})
	if !usable(err) {
		return nil, err
	}
	var out []Module
	if err := json.Unmarshal(rep.Body, &out); err != nil {
		return nil, fmt.Errorf("%w: modules: %w", ErrFailed, err)
	}
	return out, err
}

// withStale returns a decoded value and its error, or with no error the
// read's (nil or ErrStale).
func withStale[T any](v *T, err error) func(error) (*T, error) {
	return func(read error) (*T, error) {
		if err != nil {
			return nil, err
		}
		return v, read
	}
}

func decodeAs[T any](b []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%w: reply body: %w", ErrFailed, err)
	}
	return v, nil
}

// ---- twins, back end ----

// GetTwin reads the full twin of deviceID (moduleID "" for the device's
// own twin).
func (c *Client) GetTwin(ctx context.Context, deviceID, moduleID string) (*Twin, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpGetTwin, DeviceID: deviceID, ModuleID: moduleID})
	if !usable(err) {
		return nil, err
	}
	return twinOf(deviceID, moduleID, rep), err
}

// UpdateTwin merges patch, a twin document of which "tags" and
// "properties.desired" are read ({"tags":{...},"properties":{"desired":
// {...}}}), into the twin: recursively, a null member deleting. ifMatch
// ("" none, "*", or the twin etag, quoted or not) must match. Devices
// watching the twin are sent the desired part. It returns the twin after
// the change.
func (c *Client) UpdateTwin(ctx context.Context, deviceID, moduleID string, patch []byte, ifMatch string) (*Twin, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpUpdateTwin, DeviceID: deviceID, ModuleID: moduleID, IfMatch: ifMatch, Body: patch})
	if err != nil {
		return nil, err
	}
	return twinOf(deviceID, moduleID, rep), nil
}

// UpdateDesired merges patch (the desired section: {"mode":"eco"}) into
// properties.desired. ifVersion, when not 0, must be the current desired
// $version (ErrPrecondition otherwise).
func (c *Client) UpdateDesired(ctx context.Context, deviceID, moduleID string, patch []byte, ifVersion int64) (*Twin, error) {
	body := append(append([]byte(`{"properties":{"desired":`), patch...), "}}"...)
	rep, err := c.Do(ctx, &Request{Op: tw.OpUpdateTwin, DeviceID: deviceID, ModuleID: moduleID, IfVersion: ifVersion, Body: body})
	if err != nil {
		return nil, err
	}
	return twinOf(deviceID, moduleID, rep), nil
}

// ReplaceTwin replaces the twin's tags and desired properties with those
// of doc (a section doc leaves out becomes empty); ifMatch as for
// UpdateTwin. Watching devices are sent the difference as a patch.
func (c *Client) ReplaceTwin(ctx context.Context, deviceID, moduleID string, doc []byte, ifMatch string) (*Twin, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpReplaceTwin, DeviceID: deviceID, ModuleID: moduleID, IfMatch: ifMatch, Body: doc})
	if err != nil {
		return nil, err
	}
	return twinOf(deviceID, moduleID, rep), nil
}

// ---- twins, device side (a front end acting for its devices) ----

// Properties is what a device's twin GET returns.
type Properties struct {
	// JSON is the payload of the device's $iothub/twin/res/200 answer:
	// {"desired":{...,"$version":N},"reported":{...,"$version":M}}.
	JSON    []byte
	Etag    string // the twin etag
	Version int64  // the twin version
}

// GetProperties reads what a device (or module) sees of its twin.
func (c *Client) GetProperties(ctx context.Context, deviceID, moduleID string) (*Properties, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpGetProperties, DeviceID: deviceID, ModuleID: moduleID})
	if !usable(err) {
		return nil, err
	}
	return &Properties{JSON: rep.Body, Etag: rep.Etag, Version: rep.Version}, err
}

// PatchReported merges patch (the reported section, as a device sends it
// on $iothub/twin/PATCH/properties/reported/) into properties.reported and
// returns the new reported $version (the response's $version). ifVersion,
// when not 0, must be the current reported $version. A patch that breaks
// a rule returns an *Error with status 400 (malformed, a key, string,
// integer or depth rule) or 413 (over 32 KiB after the merge), and
// changes nothing.
func (c *Client) PatchReported(ctx context.Context, deviceID, moduleID string, patch []byte, ifVersion int64) (int64, error) {
	rep, err := c.Do(ctx, &Request{Op: tw.OpPatchReported, DeviceID: deviceID, ModuleID: moduleID, IfVersion: ifVersion, Body: patch})
	if err != nil {
		return 0, err
	}
	return rep.Version, nil
}

// SetConnected records that a device (or module) connected through the
// connection connID (any id unique to that connection, such as the bridge
// node and a counter); its twin's connectionState becomes Connected and a
// deviceConnected event is produced. A later connect (a takeover on
// another node) replaces connID. modelID is the IoT Plug and Play model
// id (a DTMI) the device announced when it connected; it becomes the
// twin's modelId. "" announces none and leaves modelId as it was.
func (c *Client) SetConnected(ctx context.Context, deviceID, moduleID, connID, modelID string) error {
	_, err := c.Do(ctx, &Request{Op: tw.OpSetConnection, DeviceID: deviceID, ModuleID: moduleID, Connected: true, ConnID: connID,
		Body: []byte(modelID)})
	return err
}

// SetDisconnected records that the connection connID closed. It applies
// only while connID is the current connection: when the device has
// already reconnected elsewhere it returns ErrPrecondition (and nothing
// changes), which a front end ignores. An empty connID closes whatever is
// current.
func (c *Client) SetDisconnected(ctx context.Context, deviceID, moduleID, connID string) error {
	_, err := c.Do(ctx, &Request{Op: tw.OpSetConnection, DeviceID: deviceID, ModuleID: moduleID, ConnID: connID})
	return err
}

// EnqueueC2D notes a cloud-to-device message queued for a device: its
// message id and expiry, counted in the device's cloudToDeviceMessageCount
// until AckC2D or the expiry. A device holding maxDepth unexpired
// messages refuses it with ErrQuota (403
// DeviceMaximumQueueDepthExceeded); noting a message id already held
// counts it again (ids need not be unique). It returns the messages the
// device now holds.
func (c *Client) EnqueueC2D(ctx context.Context, deviceID, messageID string, expiry time.Time, maxDepth int) (int, error) {
	body, err := json.Marshal(tw.C2DEntry{MessageID: messageID, Expiry: expiry.UnixMilli(), MaxDepth: maxDepth})
	if err != nil {
		return 0, fmt.Errorf("twin: cloud-to-device entry: %w", err)
	}
	rep, err := c.Do(ctx, &Request{Op: tw.OpEnqueueC2D, DeviceID: deviceID, Body: body})
	if err != nil {
		return 0, err
	}
	return int(rep.Version), nil
}

// AckC2D notes that a device acknowledged (or will never get) a
// cloud-to-device message EnqueueC2D noted: it leaves the count. An id
// the device does not hold is no error.
func (c *Client) AckC2D(ctx context.Context, deviceID, messageID string) error {
	body, err := json.Marshal(tw.C2DEntry{MessageID: messageID})
	if err != nil {
		return fmt.Errorf("twin: cloud-to-device entry: %w", err)
	}
	_, err = c.Do(ctx, &Request{Op: tw.OpAckC2D, DeviceID: deviceID, Body: body})
	return err
}
