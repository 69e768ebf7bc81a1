use super::*;
use std::os::unix::fs::FileTypeExt;
use std::process::Command;

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn atomic_write_replaces_and_leaves_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.json");
    write_atomic(&p, b"one").unwrap();
    write_atomic(&p, b"two").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"two");
    assert_eq!(names(dir.path()), ["x.json"]);
    let e = write_atomic(&dir.path().join("missing/x.json"), b"").unwrap_err();
    assert!(e.to_string().contains("missing"), "{e}");
}

#[test]
fn temp_names_differ_per_write() {
    let p = Path::new("/runs/x/checkpoint.json");
    let (a, b) = (temp_path(p), temp_path(p));
    assert_ne!(a, b);
    let name = a.file_name().unwrap().to_string_lossy().into_owned();
    let pid = std::process::id().to_string();
    assert!(
        name.starts_with(".checkpoint.json.") && name.contains(&pid) && name.ends_with(".json"),
        "{name}"
    );
}

/// A failing write (here a full disk, injected after the first bytes) leaves the old file and
/// no temporary file behind.
#[test]
fn failed_write_keeps_the_old_file_and_no_temp() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("checkpoint.json");
    write_atomic(&p, b"old").unwrap();
    let e = replace_with(&p, |_, f| {
        f.write_all(b"half").map_err(io_at(&p))?;
        Err(io_at(&p)(io::Error::from_raw_os_error(libc::ENOSPC)))
    })
    .unwrap_err();
    assert!(matches!(e, OutputError::Io { .. }), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    assert_eq!(names(dir.path()), ["checkpoint.json"]);
}

#[test]
fn links_fifos_folders_and_devices_are_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.v");
    std::fs::write(&real, b"kept").unwrap();
    let link = dir.path().join("link.v");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let fifo = dir.path().join("fifo.v");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut cases = vec![
        (link.clone(), "a symbolic link"),
        (fifo.clone(), "a FIFO"),
        (dir.path().to_path_buf(), "a folder"),
    ];
    // A node of /dev/full's kind inside the temporary folder (root can make one); never the
    // real /dev/full, which a broken check would replace.
    let dev = dir.path().join("full");
    let made = Command::new("mknod")
        .arg(&dev)
        .args(["c", "1", "7"])
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if made {
        cases.push((dev.clone(), "a device"));
    } else {
        eprintln!("mknod not permitted here: the device case is covered by the FIFO one");
    }
    for (path, what) in cases {
        let e = write_atomic(&path, b"new").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains(what) && text.contains(&*path.to_string_lossy()),
            "{text}"
        );
    }
    let meta = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type();
    assert!(meta(&link).is_symlink());
    assert_eq!(std::fs::read(&real).unwrap(), b"kept");
    assert!(meta(&fifo).is_fifo());
    if made {
        assert!(meta(&dev).is_char_device());
    }
}

#[test]
fn probe_finds_an_unwritable_folder_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    probe_dir(&dir.path().join("new/run"), 1 << 20).unwrap();
    assert!(names(&dir.path().join("new/run")).is_empty());
    // No file system holds 2^62 bytes: the folder has no room for such a run.
    let e = probe_dir(dir.path(), 1 << 62).unwrap_err();
    assert!(matches!(e, OutputError::Io { .. }), "{e}");
    assert_eq!(names(dir.path()), ["new"]);
    // procfs takes no new files, even from root (a chmod'ed folder would not stop root).
    let e = probe_dir(Path::new("/proc"), 1).unwrap_err();
    assert!(e.to_string().contains("/proc"), "{e}");
    let file = dir.path().join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(probe_dir(&file.join("run"), 1).is_err());
}

#[test]
fn a_second_lock_names_the_holder_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let first = RunLock::acquire(dir.path()).unwrap();
    let e = RunLock::acquire(dir.path()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, OutputError::Locked { .. }), "{text}");
    assert!(
        text.contains(&format!("pid {}", std::process::id())) && text.contains("in use"),
        "{text}"
    );
    drop(first);
    RunLock::acquire(dir.path()).unwrap();
}
