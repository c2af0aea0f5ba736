package shutdown

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// Logind is what the manager needs of systemd-logind.
type Logind interface {
	// InhibitDelayMax is logind's InhibitDelayMaxUSec: the longest a delay lock may hold a shutdown.
	InhibitDelayMax() (time.Duration, error)
	// SetInhibitDelayMax makes logind allow d (a configuration drop-in and a reload of logind).
	SetInhibitDelayMax(d time.Duration) error
	// Inhibit takes a delay lock on shutdown; release gives it back.
	Inhibit() (release func() error, err error)
	// PrepareForShutdown delivers logind's PrepareForShutdown signals: true when a shutdown begins, false
	// when one was cancelled. The channel closes when the connection ends.
	PrepareForShutdown(ctx context.Context) (<-chan bool, error)
}

const (
	logindDest   = "org.freedesktop.login1"
	logindPath   = "/org/freedesktop/login1"
	logindIface  = "org.freedesktop.login1.Manager"
	systemdDest  = "org.freedesktop.systemd1"
	systemdPath  = "/org/freedesktop/systemd1"
	systemdIface = "org.freedesktop.systemd1.Manager"
)

// DefaultLogindDropIn is where the kubelet raises InhibitDelayMaxSec, as upstream's kubelet does.
const DefaultLogindDropIn = "/etc/systemd/logind.conf.d/99-kubelet.conf"

// DBusLogind is logind on the system bus.
type DBusLogind struct {
	conn   *dbus.Conn
	dropIn string
}

// ConnectLogind connects to the system bus and checks that logind answers.
func ConnectLogind(dropIn string) (*DBusLogind, error) {
	conn, err := dbus.SystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	l := &DBusLogind{conn: conn, dropIn: dropIn}
	if _, err := l.InhibitDelayMax(); err != nil {
		return nil, fmt.Errorf("systemd-logind does not answer: %w", err)
	}
	return l, nil
}

func (l *DBusLogind) InhibitDelayMax() (time.Duration, error) {
	v, err := l.conn.Object(logindDest, logindPath).GetProperty(logindIface + ".InhibitDelayMaxUSec")
	if err != nil {
		return 0, err
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("InhibitDelayMaxUSec is a %T", v.Value())
	}
	return time.Duration(usec) * time.Microsecond, nil
}

func (l *DBusLogind) SetInhibitDelayMax(d time.Duration) error {
	if err := os.MkdirAll(filepath.Dir(l.dropIn), 0o755); err != nil {
		return err
	}
	conf := fmt.Sprintf("# Written by the kubelet for graceful node shutdown.\n[Login]\nInhibitDelayMaxSec=%d\n", int(d.Round(time.Second).Seconds()))
	if err := os.WriteFile(l.dropIn, []byte(conf), 0o644); err != nil {
		return err
	}
	// logind rereads its configuration on SIGHUP.
	return l.conn.Object(systemdDest, systemdPath).Call(systemdIface+".KillUnit", 0, "systemd-logind.service", "all",
		int32(syscall.SIGHUP)).Err
}

func (l *DBusLogind) Inhibit() (func() error, error) {
	var fd dbus.UnixFD
	err := l.conn.Object(logindDest, logindPath).Call(logindIface+".Inhibit", 0, "shutdown", "kubelet",
		"Kubelet needs time to handle node shutdown", "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take the shutdown inhibitor lock: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inhibit")
	return f.Close, nil
}

func (l *DBusLogind) PrepareForShutdown(ctx context.Context) (<-chan bool, error) {
	if err := l.conn.AddMatchSignal(dbus.WithMatchInterface(logindIface), dbus.WithMatchMember("PrepareForShutdown"),
		dbus.WithMatchObjectPath(logindPath)); err != nil {
		return nil, err
	}
	sigs := make(chan *dbus.Signal, 4)
	l.conn.Signal(sigs)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		defer l.conn.RemoveSignal(sigs)
		for {
			select {
			case <-ctx.Done():
				return
			case s, ok := <-sigs:
				if !ok {
					return
				}
				if s.Name != logindIface+".PrepareForShutdown" || len(s.Body) == 0 {
					continue
				}
				if active, ok := s.Body[0].(bool); ok {
					select {
					case out <- active:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return out, nil
}
