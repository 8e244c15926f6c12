//! One file's volatile write cache: the writes not yet fsynced, held in memory page by page and
//! laid over the backing file's bytes when the file is read.
//!
//! A page is created the first time a write touches it, filled from the backing file (as a
//! kernel page cache reads a page before a partial write), and remembers the span that writes
//! dirtied in it. An fsync writes each page's dirty span to the backing file; a power cut drops
//! the pages. The file's length as programs see it is [`Cache::len`]: the backing file's, or
//! further when pending writes extended it.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::unix::fs::FileExt;

/// The cache's granularity, the size of a kernel page.
pub const PAGE: u64 = 4096;

/// One page of pending data.
struct Page {
    /// The page's bytes: the backing file's when the page was created, then the writes.
    bytes: Box<[u8]>,
    /// The part of the page that writes changed (their hull), offsets within the page.
    dirty: Range<usize>,
}

/// The pending writes of one file.
#[derive(Default)]
pub struct Cache {
    pages: BTreeMap<u64, Page>,
    /// The file's logical length while pages are pending; `None`: the backing file's.
    len: Option<u64>,
}

impl Cache {
    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.pages.is_empty()
    }

    /// The file's length as programs see it, given the backing file's length.
    pub fn len(&self, backing_len: u64) -> u64 {
        self.len.unwrap_or(backing_len)
    }

    /// Bytes written and not yet fsynced (the dirty spans of the pending pages).
    pub fn pending_bytes(&self) -> u64 {
        self.pages.values().map(|p| p.dirty.len() as u64).sum()
    }

    /// Holds `data`, written at `offset`, in memory.
    pub fn write(&mut self, backing: &File, offset: u64, data: &[u8]) -> io::Result<()> {
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFBIG))?;
        let backing_len = backing.metadata()?.len();
        let mut at = offset;
        while at < end {
            let index = at / PAGE;
            let start = (at - index * PAGE) as usize;
            let n = ((PAGE as usize) - start).min((end - at) as usize);
            let page = match self.pages.entry(index) {
                std::collections::btree_map::Entry::Occupied(page) => page.into_mut(),
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(Page::read(backing, index, self.len.unwrap_or(backing_len))?)
                }
            };
            let from = (at - offset) as usize;
            page.bytes[start..start + n].copy_from_slice(&data[from..from + n]);
            page.dirty = if page.dirty.is_empty() {
                start..start + n
            } else {
                page.dirty.start.min(start)..page.dirty.end.max(start + n)
            };
            at += n as u64;
        }
        self.len = Some(self.len(backing_len).max(end));
        Ok(())
    }

    /// Up to `size` bytes at `offset`: the backing file's, with the pending pages laid over
    /// them, and nothing past the file's length.
    pub fn read(&self, backing: &File, offset: u64, size: u32) -> io::Result<Vec<u8>> {
        let len = self.len(backing.metadata()?.len());
        let end = offset.saturating_add(u64::from(size)).min(len);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        read_full_at(backing, &mut buf, offset)?;
        for (&index, page) in self.pages.range(offset / PAGE..=(end - 1) / PAGE) {
            let page_start = index * PAGE;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE);
            buf[(from - offset) as usize..(to - offset) as usize].copy_from_slice(
                &page.bytes[(from - page_start) as usize..(to - page_start) as usize],
            );
        }
        Ok(buf)
    }

    /// Follows a truncation of the backing file to `len` (metadata goes straight to the
    /// backing file): pending bytes past `len` are gone.
    pub fn truncate(&mut self, len: u64) {
        let first_gone = len.div_ceil(PAGE);
        self.pages.split_off(&first_gone);
        if let Some((&index, page)) = self.pages.iter_mut().next_back() {
            let keep = (len - index * PAGE).min(PAGE) as usize;
            page.bytes[keep..].fill(0);
            page.dirty.end = page.dirty.end.min(keep);
            page.dirty.start = page.dirty.start.min(page.dirty.end);
            if page.dirty.is_empty() {
                self.pages.remove(&index);
            }
        }
        self.len = if self.pages.is_empty() {
            None
        } else {
            Some(len)
        };
    }

    /// Writes every pending page to the backing file (the caller syncs it) and forgets them;
    /// the bytes written.
    pub fn flush(&mut self, backing: &File) -> io::Result<u64> {
        let mut written = 0;
        while let Some((&index, page)) = self.pages.iter().next() {
            backing.write_all_at(
                &page.bytes[page.dirty.clone()],
                index * PAGE + page.dirty.start as u64,
            )?;
            written += page.dirty.len() as u64;
            self.pages.remove(&index);
        }
        if let Some(len) = self.len.take() {
            // A file extended past its last dirty byte cannot be, but keep the length exact.
            if backing.metadata()?.len() < len {
                backing.set_len(len)?;
            }
        }
        Ok(written)
    }

    /// Forgets every pending page, as a power cut does; the bytes lost.
    pub fn drop_all(&mut self) -> u64 {
        let lost = self.pending_bytes();
        self.pages.clear();
        self.len = None;
        lost
    }
}

impl Page {
    /// Page `index` as the file holds it now (zeros past `len` and past the backing file's end).
    fn read(backing: &File, index: u64, len: u64) -> io::Result<Page> {
        let start = index * PAGE;
        let mut bytes = vec![0u8; PAGE as usize].into_boxed_slice();
        let upto = len.saturating_sub(start).min(PAGE) as usize;
        read_full_at(backing, &mut bytes[..upto], start)?;
        Ok(Page { bytes, dirty: 0..0 })
    }
}

/// Fills `buf` from `file` at `offset`, leaving zeros past the file's end.
fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing(content: &[u8]) -> (tempfile::TempDir, File) {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f");
        std::fs::write(&path, content).expect("write");
        let file = File::options()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        (dir, file)
    }

    fn on_disk(file: &File) -> Vec<u8> {
        let mut buf = vec![0; file.metadata().expect("stat").len() as usize];
        read_full_at(file, &mut buf, 0).expect("read");
        buf
    }

    #[test]
    fn reads_see_pending_writes_and_the_disk_does_not() {
        let (_dir, file) = backing(b"hello world");
        let mut cache = Cache::default();
        cache.write(&file, 6, b"there, friend").expect("write");
        assert_eq!(cache.len(11), 19);
        assert_eq!(
            cache.read(&file, 0, 100).expect("read"),
            b"hello there, friend"
        );
        assert_eq!(cache.read(&file, 3, 5).expect("read"), b"lo th");
        assert_eq!(on_disk(&file), b"hello world");
        assert_eq!(cache.pending_bytes(), 13);
        assert_eq!(cache.drop_all(), 13);
        assert_eq!(cache.read(&file, 0, 100).expect("read"), b"hello world");
    }

    #[test]
    fn flush_writes_only_what_was_written_across_pages() {
        let (_dir, file) = backing(&[7u8; 10_000]);
        let mut cache = Cache::default();
        cache.write(&file, 4090, &[1u8; 20]).expect("write");
        cache.write(&file, 12_000, &[2u8; 10]).expect("write");
        assert_eq!(cache.len(10_000), 12_010);
        // The hole between the old end and the write reads as zeros.
        assert_eq!(cache.read(&file, 11_990, 20).expect("read")[..10], [0; 10]);
        assert_eq!(cache.flush(&file).expect("flush"), 30);
        assert!(cache.is_empty());
        let disk = on_disk(&file);
        assert_eq!(disk.len(), 12_010);
        assert_eq!(&disk[4085..4090], &[7u8; 5]);
        assert_eq!(&disk[4090..4110], &[1u8; 20]);
        assert_eq!(&disk[4110..4115], &[7u8; 5]);
        assert_eq!(&disk[12_000..], &[2u8; 10]);
    }

    #[test]
    fn truncate_cuts_pending_bytes_past_the_new_end() {
        let (_dir, file) = backing(b"");
        let mut cache = Cache::default();
        cache.write(&file, 0, &[5u8; 9000]).expect("write");
        file.set_len(5000).expect("truncate");
        cache.truncate(5000);
        assert_eq!(cache.len(5000), 5000);
        assert_eq!(cache.pending_bytes(), 5000);
        file.set_len(6000).expect("extend");
        cache.truncate(6000);
        let read = cache.read(&file, 0, 10_000).expect("read");
        assert_eq!(read.len(), 6000);
        assert!(read[..5000].iter().all(|&b| b == 5) && read[5000..].iter().all(|&b| b == 0));
        file.set_len(0).expect("truncate");
        cache.truncate(0);
        assert!(cache.is_empty());
        assert_eq!(cache.len(0), 0);
    }
}
