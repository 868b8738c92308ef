//! The CLI's side of AWS: `--region` and `--profile`, the start-up check that a Region and
//! credentials are there, and what a request that could not reach DynamoDB prints. Each says
//! once what went wrong and what to set.

use std::path::PathBuf;

use aws_credential_types::provider::error::CredentialsError;
use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::config::ProvideCredentials;
use aws_sdk_dynamodb::error::{ConnectorError, SdkError};
use aws_sdk_dynamodb::operation::describe_table::DescribeTableError;
use ttl_sweeper::store::DynamoStore;

/// Exit status of bad configuration: arguments, settings, the AWS Region or credentials, a
/// missing table or index.
pub(crate) const CONFIGURATION: u8 = 2;

/// Exit status when DynamoDB could not be reached: the endpoint refused or did not answer.
pub(crate) const UNREACHABLE: u8 = 3;

/// A failure the CLI explains itself: the message it prints and its exit status.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Failure {
    /// What went wrong and what to set, in one message.
    pub(crate) message: String,
    /// The exit status.
    pub(crate) code: u8,
}

/// Applies `--region` and `--profile` as the SDK's own `AWS_REGION` and `AWS_PROFILE`, which every
/// client (and the leader lease's holder name) is configured from. Called before any other thread
/// exists (setting a variable while another thread reads the environment is undefined behaviour).
pub(crate) fn select(region: Option<&str>, profile: Option<&str>) {
    if let Some(region) = region {
        std::env::set_var("AWS_REGION", region);
    }
    if let Some(profile) = profile {
        std::env::set_var("AWS_PROFILE", profile);
    }
}

/// Where the DynamoDB requests go, as the configuration chain says.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The Region.
    region: String,
    /// The endpoint URL configured, if any, and where: `AWS_ENDPOINT_URL_DYNAMODB`,
    /// `AWS_ENDPOINT_URL`, or the profile's `endpoint_url`.
    endpoint: Option<(String, &'static str)>,
}

impl Target {
    /// `error`, from opening the tables: when its requests could not reach DynamoDB (refused,
    /// unanswered), a [`Failure`] naming the endpoint and the Region, with exit status
    /// [`UNREACHABLE`]; else `error` as it is.
    pub(crate) fn explain(&self, error: impl Into<anyhow::Error>) -> anyhow::Error {
        let error = error.into();
        let Some(cause) = unreachable(&error) else {
            return error;
        };
        let region = &self.region;
        let message = match &self.endpoint {
            Some((url, source)) => format!(
                "could not reach DynamoDB at {url} (Region {region}): {cause}. Check the \
                 network, the endpoint ({source}) and the Region (AWS_REGION or --region)"
            ),
            None => format!(
                "could not reach DynamoDB at the default endpoint for {region}: {cause}. Check \
                 the network and the Region (AWS_REGION or --region), or set AWS_ENDPOINT_URL \
                 if DynamoDB is elsewhere"
            ),
        };
        anyhow::Error::new(Failure {
            message,
            code: UNREACHABLE,
        })
    }
}

/// What made `error` a request that never reached DynamoDB (the connection refused or timed
/// out, no answer in time), if that is what it is: the innermost cause.
fn unreachable(error: &anyhow::Error) -> Option<String> {
    let connection = error.chain().any(|e| {
        let connector = e.downcast_ref::<ConnectorError>();
        let describe = e.downcast_ref::<SdkError<DescribeTableError, HttpResponse>>();
        connector.is_some_and(|c| c.is_io() || c.is_timeout())
            || matches!(describe, Some(SdkError::TimeoutError(_)))
    });
    let innermost = error.chain().last()?.to_string();
    connection.then_some(innermost)
}

/// Loads the AWS configuration as the DynamoDB client will ([`DynamoStore::config_loader`]) and
/// checks, before any request, what none can do without: a Region, and credentials (resolved
/// once here; a `--profile` that names no profile is refused first). The [`Failure`]s say what
/// to set.
pub(crate) async fn check(profile_flag: Option<&str>) -> anyhow::Result<Target> {
    let profile = std::env::var("AWS_PROFILE").ok().filter(|p| !p.is_empty());
    let missing = profile.as_deref().and_then(missing_profile);
    if let (Some(name), Some(missing)) = (profile_flag, &missing) {
        return Err(configuration(format!(
            "--profile {name}: {missing}. Name a profile of those files, or leave --profile out"
        )));
    }
    let because = missing.map(|m| format!(" ({m})")).unwrap_or_default();
    let sdk = DynamoStore::config_loader().load().await;
    let Some(region) = sdk.region().map(ToString::to_string) else {
        return Err(configuration(format!(
            "no AWS Region{because}: set AWS_REGION or pass --region (e.g. --region us-east-1), \
             or give the profile a region"
        )));
    };
    let credentials = match sdk.credentials_provider() {
        Some(provider) => provider.provide_credentials().await.map(drop),
        None => Err(CredentialsError::not_loaded_no_source()),
    };
    if let Err(e) = credentials {
        tracing::debug!(error = %crate::said_once(&e), "the credential providers tried");
        let what_to_set = "set AWS_PROFILE or pass --profile to use a profile of the AWS config \
                           file (AWS_CONFIG_FILE, default ~/.aws/config), or set \
                           AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; on AWS, the instance, \
                           task or function role provides them";
        return Err(configuration(match e {
            CredentialsError::CredentialsNotLoaded(_) => {
                format!("no AWS credentials found{because}: {what_to_set}")
            }
            other => format!(
                "could not load AWS credentials{because}: {}. Check them, or {what_to_set}",
                crate::said_once(&other)
            ),
        }));
    }
    // `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`: the SDK then ignores every configured endpoint.
    let ignored = std::env::var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")
        .is_ok_and(|v| v.eq_ignore_ascii_case("true"));
    let var = |name: &'static str| {
        let url = std::env::var(name).ok().filter(|url| !url.is_empty());
        url.filter(|_| !ignored).map(|url| (url, name))
    };
    let endpoint = var("AWS_ENDPOINT_URL_DYNAMODB").or_else(|| {
        let url = sdk.endpoint_url()?.to_owned();
        Some(var("AWS_ENDPOINT_URL").unwrap_or((url, "the profile's endpoint_url")))
    });
    Ok(Target { region, endpoint })
}

/// A [`Failure`] of the configuration.
fn configuration(message: String) -> anyhow::Error {
    let code = CONFIGURATION;
    anyhow::Error::new(Failure { message, code })
}

/// Why `profile` is not one of the AWS config and credentials files' profiles, if it is not: the
/// sections of `AWS_CONFIG_FILE` (default `~/.aws/config`: `[profile NAME]`, `[default]`) and
/// `AWS_SHARED_CREDENTIALS_FILE` (default `~/.aws/credentials`: `[NAME]`), as the SDK reads them.
fn missing_profile(profile: &str) -> Option<String> {
    let files = [
        ("AWS_CONFIG_FILE", ".aws/config"),
        ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials"),
    ]
    .map(|(var, default)| profile_file(var, default));
    let defined = files.iter().flatten().any(|path| {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().any(|line| {
            let Some(section) = line.trim().strip_prefix('[') else {
                return false;
            };
            let section = section.split(']').next().unwrap_or_default().trim();
            let name = section
                .strip_prefix("profile")
                .filter(|n| n.starts_with(char::is_whitespace));
            name.unwrap_or(section).trim() == profile
        })
    });
    let mut shown: Vec<String> = files
        .iter()
        .flatten()
        .map(|p| p.display().to_string())
        .collect();
    shown.dedup();
    (!defined).then(|| format!("profile `{profile}` is not in {}", shown.join(" or ")))
}

/// The file `var` names (`~/` standing for the home directory), else `~/<default>`.
fn profile_file(var: &str, default: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    match std::env::var(var).ok().filter(|v| !v.is_empty()) {
        Some(path) => match path.strip_prefix("~/") {
            Some(rest) => home.map(|h| h.join(rest)),
            None => Some(PathBuf::from(path)),
        },
        None => home.map(|h| h.join(default)),
    }
}
