//! `vmad discover` on ibsim with OpenSM up: LID routing once LIDs are known.

use std::process::Command;

use super::fabric::Fabric;

/// `vmad --transport ibsim <args>` on this ibsim; its stdout.
fn vmad(f: &Fabric, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_vmad"))
        .args(["--transport", "ibsim"])
        .args(args)
        .envs(f.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run vmad");
    assert!(
        out.status.success(),
        "vmad {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The number after `"key":` in vmad's JSON.
fn number(json: &str, key: &str) -> u64 {
    let at = json.find(&format!("\"{key}\":")).expect(key) + key.len() + 3;
    let digits: String = json[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

#[test]
#[ignore = "needs ibsim/opensm: run by ./scripts/test"]
fn ibsim_vmad_discover_goes_lid_routed_under_opensm() {
    let f = Fabric::start("ft234.net", &[]);
    f.opensm(&[]);
    let json = vmad(&f, &["--json", "discover"]);
    let (smps, lid_routed) = (number(&json, "smps"), number(&json, "lid_routed"));
    assert!(lid_routed > smps / 4, "{lid_routed} of {smps} LID-routed");
    // The same topology file as by directed route alone (the last line counts SMPs).
    let text = |args: &[&str]| {
        let out = vmad(&f, args);
        out.lines()
            .filter(|l| !l.contains("SMPs in"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let by_lid = text(&["discover"]);
    assert_eq!(by_lid, text(&["discover", "--dr-only"]));
    assert_eq!(by_lid.matches("\nSwitch\t").count(), 18, "switches");
}
