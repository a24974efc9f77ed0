package modelfetch

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// unpack unpacks a .tar.gz, .tgz or .zip file into dir and removes it; other files stay as they
// are (false). Entries that would leave dir (.., absolute paths) and links are refused, and the
// unpacked size counts against maxBytes (0: no limit).
func unpack(file, dir string, maxBytes int64) (bool, error) {
	name := strings.ToLower(file)
	var err error
	switch {
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		err = untar(file, dir, maxBytes)
	case strings.HasSuffix(name, ".zip"):
		err = unzip(file, dir, maxBytes)
	default:
		return false, nil
	}
	if err != nil {
		return true, err
	}
	return true, os.Remove(file)
}

func untar(file, dir string, maxBytes int64) error {
	in, err := os.Open(file)
	if err != nil {
		return err
	}
	defer in.Close()
	gz, err := gzip.NewReader(in)
	if err != nil {
		return err
	}
	f := &fetcher{dir: dir, o: Options{MaxBytes: maxBytes}}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
			if err := f.save(h.Name, tr); err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q is a link or special file: refused", h.Name)
		}
	}
}

func unzip(file, dir string, maxBytes int64) error {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return err
	}
	defer zr.Close()
	f := &fetcher{dir: dir, o: Options{MaxBytes: maxBytes}}
	for _, e := range zr.File {
		if e.FileInfo().IsDir() {
			continue
		}
		if !e.Mode().IsRegular() {
			return fmt.Errorf("entry %q is a link or special file: refused", e.Name)
		}
		r, err := e.Open()
		if err != nil {
			return err
		}
		err = f.save(e.Name, r)
		r.Close()
		if err != nil {
			return err
		}
	}
	return nil
}
