package modelfetch

import (
	"archive/tar"
	"archive/zip"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// What a fetch may write besides Options.MaxBytes: a model is a few files to a few thousand (a
// Triton repository, a Hugging Face snapshot), never millions, and a small archive of millions
// of empty files or folders would use up the node's inodes.
const (
	// maxEntries bounds the files and folders a fetch creates, and the entries an archive has
	// (Options.MaxEntries, when set, instead).
	maxEntries = 100_000
	// maxDepth bounds the folders a path may nest.
	maxDepth = 32
	// maxTrailer bounds what a streamed archive may carry after its end.
	maxTrailer = 1 << 20
)

// streamed says whether a fetched object of this name is an archive read front to back
// (.tar.gz, .tgz): it is unpacked as it arrives and never stored.
func streamed(name string) bool {
	name = strings.ToLower(name)
	return strings.HasSuffix(name, ".tar.gz") || strings.HasSuffix(name, ".tgz")
}

// object saves one fetched object of the given name: an archive that streams is unpacked as it
// arrives, into dir, its digest taken of the archive's bytes; anything else is saved as it is.
func (f *fetcher) object(name string, r io.Reader) error {
	if !streamed(name) {
		return f.save(name, r)
	}
	h := sha256.New()
	if err := f.untar(io.TeeReader(r, h)); err != nil {
		return fmt.Errorf("unpacking %s: %w", name, err)
	}
	f.digest, f.unpacked = hex.EncodeToString(h.Sum(nil)), true
	return nil
}

// untar unpacks a gzipped tar stream into the fetch's folder. Entries that would leave it (..,
// absolute paths), links and special files are refused; every file counts against the fetch's
// bounds.
func (f *fetcher) untar(r io.Reader) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for entries := 1; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			// The rest of the stream (gzip's end, tar's padding), for the digest: a few blocks,
			// never more than maxTrailer.
			n, err := io.Copy(io.Discard, io.LimitReader(r, maxTrailer+1))
			if err == nil && n > maxTrailer {
				err = fmt.Errorf("more than %d bytes follow the archive's end: refused", maxTrailer)
			}
			return err
		}
		if err != nil {
			return err
		}
		if entries > f.maxEntries() {
			return f.tooManyEntries()
		}
		switch h.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader: // a folder is made with its files; a global header (git archive's commit id) is metadata
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

func (f *fetcher) maxEntries() int {
	if f.o.MaxEntries > 0 {
		return f.o.MaxEntries
	}
	return maxEntries
}

func (f *fetcher) tooManyEntries() error {
	return fmt.Errorf("it has more than %d entries, more than a model has: refused (it would use up the node's inodes)", f.maxEntries())
}

// unzip unpacks a saved .zip file (a format read from its end) into the fetch's folder and removes
// it. While it is unpacked the archive is on disk too, so its bytes count against the size limit.
func (f *fetcher) unzip(file string) error {
	info, err := os.Stat(file)
	if err != nil {
		return err
	}
	// The central directory is parsed whole (an entry in memory each) by OpenReader: its count,
	// in the end record, is read first.
	if n, err := zipEntries(file, info.Size()); err != nil {
		return err
	} else if n > uint64(f.maxEntries()) {
		return f.tooManyEntries()
	}
	zr, err := zip.OpenReader(file)
	if err != nil {
		return err
	}
	defer zr.Close()
	f.files-- // the archive itself, about to give way to what it holds
	if len(zr.File) > f.maxEntries() {
		return f.tooManyEntries()
	}
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
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("%w (a .zip is unpacked beside itself, so the archive and what it holds together must fit; a .tar.gz is unpacked as it is fetched)", err)
		}
		if err != nil {
			return err
		}
	}
	zr.Close()
	if err := os.Remove(file); err != nil {
		return err
	}
	f.bytes -= info.Size()
	return nil
}

// The .zip end records (APPNOTE.TXT 4.3.14 to 4.3.16): the end of central directory record, at
// most 64 KiB of comment before the file's end, and where its count does not fit 16 bits the
// Zip64 end record, found through the locator just before it.
const (
	zipEndSignature     = 0x06054b50
	zipEndSize          = 22
	zip64LocatorSig     = 0x07064b50
	zip64LocatorSize    = 20
	zip64EndSignature   = 0x06064b50
	zip64EndSize        = 56
	zipMaxCommentLength = 1<<16 - 1
)

// zipEntries is the number of entries a .zip's end record says its central directory has.
func zipEntries(file string, size int64) (uint64, error) {
	fh, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	tail := min(size, zipEndSize+zipMaxCommentLength+zip64LocatorSize)
	buf := make([]byte, tail)
	if _, err := fh.ReadAt(buf, size-tail); err != nil {
		return 0, err
	}
	end := -1
	for i := len(buf) - zipEndSize; i >= 0; i-- {
		if binary.LittleEndian.Uint32(buf[i:]) == zipEndSignature {
			end = i
			break
		}
	}
	if end < 0 {
		return 0, errors.New("it is not a .zip file (no end of central directory record)")
	}
	if n := binary.LittleEndian.Uint16(buf[end+10:]); n != 0xffff {
		return uint64(n), nil
	}
	loc := end - zip64LocatorSize
	if loc < 0 || binary.LittleEndian.Uint32(buf[loc:]) != zip64LocatorSig {
		return 0xffff, nil
	}
	rec := make([]byte, zip64EndSize)
	at := int64(binary.LittleEndian.Uint64(buf[loc+8:]))
	if at < 0 || at > size-zip64EndSize {
		return 0, errors.New("its Zip64 end record lies outside the file: it is not a valid .zip file")
	}
	if _, err := fh.ReadAt(rec, at); err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(rec) != zip64EndSignature {
		return 0, errors.New("its Zip64 end record is missing: it is not a valid .zip file")
	}
	return binary.LittleEndian.Uint64(rec[32:]), nil
}

// isZip says whether a saved object is a .zip to unpack.
func isZip(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".zip") }

// place is where rel goes under the fetch's folder, once the folders it needs are there: it
// refuses a path that would leave the folder or nest too deep, and counts the folders it makes
// against maxEntries.
func (f *fetcher) place(rel string) (string, error) {
	dst, err := within(f.dir, rel)
	if err != nil {
		return "", err
	}
	relClean, _ := filepath.Rel(f.dir, dst)
	if depth := strings.Count(relClean, string(filepath.Separator)); depth > maxDepth {
		return "", fmt.Errorf("%q nests %d folders deep, more than %d: refused", rel, depth, maxDepth)
	}
	for d := filepath.Dir(dst); d != f.dir && !f.made[d]; d = filepath.Dir(d) {
		if f.made == nil {
			f.made = map[string]bool{}
		}
		f.made[d] = true
	}
	if f.files+int64(len(f.made)) >= int64(f.maxEntries()) {
		return "", f.tooManyEntries()
	}
	return dst, os.MkdirAll(filepath.Dir(dst), 0o755)
}
