//! Configuration: dialog policy, bridge mode, reconnect policy.

use crate::error::Error;
use cdp_transport::ConnectOptions;
use std::str::FromStr;
use std::time::Duration;

/// What happens to a native dialog when it opens (seed 000, "dialog policy").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DialogPolicy {
    /// Pending until answered; a watchdog dismisses it after
    /// [`SupervisorConfig::dialog_timeout`] and records `watchdog`. The default.
    #[default]
    MustRespond,
    /// Dismissed at once; recorded `auto_policy`.
    AutoDismiss,
    /// Accepted at once (a prompt gets its default text); recorded `auto_policy`.
    AutoAccept,
}

impl DialogPolicy {
    /// The snake_case name (`must_respond`, `auto_dismiss`, `auto_accept`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MustRespond => "must_respond",
            Self::AutoDismiss => "auto_dismiss",
            Self::AutoAccept => "auto_accept",
        }
    }
}

impl FromStr for DialogPolicy {
    type Err = Error;
    /// Parses `must_respond`, `auto_dismiss`, `auto_accept`.
    ///
    /// # Errors
    /// [`Error::InvalidPolicy`] for any other name.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "must_respond" => Ok(Self::MustRespond),
            "auto_dismiss" => Ok(Self::AutoDismiss),
            "auto_accept" => Ok(Self::AutoAccept),
            other => Err(Error::InvalidPolicy {
                given: other.into(),
            }),
        }
    }
}

/// Whether the dialog bridge (issue 4, `bridge-script`) is installed on each session.
///
/// When on, every page, popup and OOPIF session gets `Fetch.enable` with the
/// bridge host's patterns only and the bridge script
/// (`Page.addScriptToEvaluateOnNewDocument{runImmediately}`, plus a
/// `Runtime.evaluate` into documents already loaded) before it is resumed;
/// `alert`/`confirm`/`prompt` then arrive as bridge dialogs
/// ([`crate::DialogPath::Bridge`]) that no proxy can close. Native dialogs
/// (CSP or permissions policy blocking the bridge, `beforeunload`) keep
/// working as the backstop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BridgeMode {
    /// Native dialogs only. The default.
    #[default]
    Off,
    /// Install the bridge on every session.
    On,
    /// Off until a native dialog is closed by someone else (not an answer of
    /// ours) within [`SupervisorConfig::auto_bridge_window`] of opening (a
    /// proxy is dismissing dialogs); then on for every current and later
    /// session, for the supervisor's lifetime (also after reconnects).
    Auto,
}

impl FromStr for BridgeMode {
    type Err = Error;
    /// Parses `off`, `on`, `auto`.
    ///
    /// # Errors
    /// [`Error::InvalidBridgeMode`] for any other name.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "off" => Ok(Self::Off),
            "on" => Ok(Self::On),
            "auto" => Ok(Self::Auto),
            other => Err(Error::InvalidBridgeMode {
                given: other.into(),
            }),
        }
    }
}

/// How to answer a dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DialogAction {
    /// OK / leave the page.
    Accept,
    /// Cancel / stay on the page.
    Dismiss,
}

impl FromStr for DialogAction {
    type Err = Error;
    /// Parses `accept` or `dismiss`.
    ///
    /// # Errors
    /// [`Error::InvalidAction`] for anything else.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "accept" => Ok(Self::Accept),
            "dismiss" => Ok(Self::Dismiss),
            other => Err(Error::InvalidAction {
                given: other.into(),
            }),
        }
    }
}

/// Reconnect after a lost socket or a detached page session.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ReconnectPolicy {
    /// Consecutive failed attempts before giving up (the view then stays
    /// `active: false`). Default 5; 0 disables reconnecting.
    pub max_consecutive_failures: u32,
    /// Wait before the first attempt; doubled after each failure. Default 200 ms.
    pub initial_backoff: Duration,
    /// Upper bound on the wait between attempts. Default 5 s.
    pub max_backoff: Duration,
}

impl Default for ReconnectPolicy {
    fn default() -> Self {
        Self {
            max_consecutive_failures: 5,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
        }
    }
}

/// Supervisor configuration. Every field has a documented default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SupervisorConfig {
    /// Dialog policy. Default [`DialogPolicy::MustRespond`].
    pub policy: DialogPolicy,
    /// `must_respond` watchdog: a dialog pending this long is dismissed and
    /// recorded `watchdog`. Default 300 s.
    pub dialog_timeout: Duration,
    /// Dialog bridge mode. Default [`BridgeMode::Off`].
    pub bridge: BridgeMode,
    /// [`BridgeMode::Auto`]: a native dialog closed by someone else within
    /// this long of opening (as the supervisor saw the two events) switches
    /// the bridge on. Default 100 ms (a hosted browser's proxy closes dialogs
    /// in ~10 ms; a person takes far longer).
    pub auto_bridge_window: Duration,
    /// Bound on setting up one paused target before it is resumed anyway
    /// (`Runtime.runIfWaitingForDebugger` is sent even when setup fails). Default 3 s.
    /// The target gate resumes a claimed popup itself when this supervisor
    /// has not done so within this bound plus 3 s.
    pub setup_timeout: Duration,
    /// Bound on the calls made while attaching or re-attaching. Default 10 s.
    pub attach_timeout: Duration,
    /// Reconnect policy.
    pub reconnect: ReconnectPolicy,
    /// Options for connections this crate opens (registry, reconnect).
    pub connect_options: ConnectOptions,
}

impl Default for SupervisorConfig {
    fn default() -> Self {
        Self {
            policy: DialogPolicy::MustRespond,
            dialog_timeout: Duration::from_secs(300),
            bridge: BridgeMode::Off,
            auto_bridge_window: Duration::from_millis(100),
            setup_timeout: Duration::from_secs(3),
            attach_timeout: Duration::from_secs(10),
            reconnect: ReconnectPolicy::default(),
            connect_options: ConnectOptions::default(),
        }
    }
}

impl SupervisorConfig {
    /// Sets the policy from its name.
    ///
    /// # Errors
    /// [`Error::InvalidPolicy`] for an unknown name.
    pub fn with_policy_name(mut self, name: &str) -> Result<Self, Error> {
        self.policy = name.parse()?;
        Ok(self)
    }
    /// Sets [`SupervisorConfig::policy`].
    pub fn policy(mut self, p: DialogPolicy) -> Self {
        self.policy = p;
        self
    }
    /// Sets [`SupervisorConfig::dialog_timeout`].
    pub fn dialog_timeout(mut self, d: Duration) -> Self {
        self.dialog_timeout = d;
        self
    }
    /// Sets [`SupervisorConfig::bridge`].
    pub fn bridge(mut self, b: BridgeMode) -> Self {
        self.bridge = b;
        self
    }
    /// Sets [`SupervisorConfig::auto_bridge_window`].
    pub fn auto_bridge_window(mut self, d: Duration) -> Self {
        self.auto_bridge_window = d;
        self
    }
    /// Sets [`SupervisorConfig::reconnect`].
    pub fn reconnect(mut self, r: ReconnectPolicy) -> Self {
        self.reconnect = r;
        self
    }
    /// Sets [`SupervisorConfig::connect_options`].
    pub fn connect_options(mut self, o: ConnectOptions) -> Self {
        self.connect_options = o;
        self
    }
}

impl ReconnectPolicy {
    /// Sets [`ReconnectPolicy::max_consecutive_failures`].
    pub fn max_consecutive_failures(mut self, n: u32) -> Self {
        self.max_consecutive_failures = n;
        self
    }
    /// Sets [`ReconnectPolicy::initial_backoff`].
    pub fn initial_backoff(mut self, d: Duration) -> Self {
        self.initial_backoff = d;
        self
    }
}
