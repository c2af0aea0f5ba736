package csidriver

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Loop devices back the staged block volumes. They are driven with the kernel's ioctls, not losetup: the
// driver runs in a busybox container.

const (
	loopControl = "/dev/loop-control"
	// loopAttachAttempts bounds the race with another process taking the free device between
	// LOOP_CTL_GET_FREE and LOOP_CONFIGURE.
	loopAttachAttempts = 5
)

// attachLoop attaches the image file to a free loop device and returns the device's path (/dev/loopN). In a
// container whose /dev was populated at start, a device the kernel made later has no node: it is made.
func attachLoop(image string) (string, error) {
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", loopControl, err)
	}
	defer ctl.Close()
	img, err := os.OpenFile(image, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer img.Close()
	for range loopAttachAttempts {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return "", fmt.Errorf("find a free loop device: %w", err)
		}
		dev := fmt.Sprintf("/dev/loop%d", n)
		if err := ensureLoopNode(dev); err != nil {
			return "", err
		}
		err = configureLoop(dev, img, image)
		if errors.Is(err, unix.EBUSY) {
			continue // taken since LOOP_CTL_GET_FREE
		}
		if err != nil {
			return "", fmt.Errorf("attach %s to %s: %w", image, dev, err)
		}
		return dev, nil
	}
	return "", fmt.Errorf("attach %s: every free loop device was taken before it could be used", image)
}

// configureLoop makes dev read and write img: LOOP_CONFIGURE (Linux 5.8), else LOOP_SET_FD and
// LOOP_SET_STATUS64.
func configureLoop(dev string, img *os.File, name string) error {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fd := int(f.Fd())
	cfg := unix.LoopConfig{Fd: uint32(img.Fd())}
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], name)
	err = unix.IoctlLoopConfigure(fd, &cfg)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOTTY) {
		return err
	}
	if err := unix.IoctlSetInt(fd, unix.LOOP_SET_FD, int(img.Fd())); err != nil {
		return err
	}
	if err := unix.IoctlLoopSetStatus64(fd, &cfg.Info); err != nil {
		return errors.Join(err, unix.IoctlSetInt(fd, unix.LOOP_CLR_FD, 0))
	}
	return nil
}

// ensureLoopNode makes the block device node dev (/dev/loopN) when it is missing, with the numbers sysfs
// gives the device.
func ensureLoopNode(dev string) error {
	fi, err := os.Stat(dev)
	if err == nil {
		if fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("%s is not a block device", dev)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	b, err := os.ReadFile(filepath.Join("/sys/class/block", filepath.Base(dev), "dev"))
	if err != nil {
		return fmt.Errorf("make %s: %w", dev, err)
	}
	major, minor, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	maj, err1 := strconv.ParseUint(major, 10, 32)
	mnr, err2 := strconv.ParseUint(minor, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return fmt.Errorf("make %s: sysfs gives the device number %q", dev, b)
	}
	err = unix.Mknod(dev, unix.S_IFBLK|0o660, int(unix.Mkdev(uint32(maj), uint32(mnr))))
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("make %s: %w", dev, err)
	}
	return nil
}

// loopBacks reports whether the loop device dev is attached to the image file (same device and inode): a
// device recorded before a restart may since have been detached, or attached to something else.
func loopBacks(dev, image string) (bool, error) {
	if dev == "" {
		return false, nil
	}
	f, err := os.Open(dev)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	info, err := unix.IoctlLoopGetStatus64(int(f.Fd()))
	if errors.Is(err, unix.ENXIO) {
		return false, nil // not attached
	}
	if err != nil {
		return false, fmt.Errorf("status of %s: %w", dev, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(image, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, err
	}
	return info.Device == st.Dev && info.Inode == st.Ino, nil
}

// detachLoop detaches the loop device dev if it backs the image; otherwise there is nothing to do.
func detachLoop(dev, image string) error {
	ok, err := loopBacks(dev, image)
	if err != nil || !ok {
		return err
	}
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_CLR_FD, 0); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("detach %s: %w", dev, err)
	}
	return nil
}

// refreshLoopCapacity makes the loop device dev see its image's current size (after the image grew).
func refreshLoopCapacity(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.IoctlSetInt(int(f.Fd()), unix.LOOP_SET_CAPACITY, 0); err != nil {
		return fmt.Errorf("refresh the capacity of %s: %w", dev, err)
	}
	return nil
}
