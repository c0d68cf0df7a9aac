//! Shell completion: `gannet completion SHELL` prints clap_complete's script with a hook that
//! completes app names, deployment ids and plan preview ids from the server, through the
//! hidden `gannet __complete`: `apps`, `deployments` and `previews` list them, and
//! `next -- WORDS` lists what the word after WORDS (the command line so far) names, or nothing,
//! so the script falls back to completing commands and flags.

use std::time::Duration;

use clap::{Arg, Command, CommandFactory};
use clap_complete::Shell;

use crate::client::{self, Client};
use crate::exit::Exit;
use crate::{Cli, Server};

/// What `gannet __complete` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Listed {
    /// Every app's name.
    Apps,
    /// The newest deployments' ids.
    Deployments,
    /// The newest plan previews' ids.
    Previews,
    /// What the word after the command line given after `--` names: app names, deployment
    /// ids, or nothing.
    Next,
}

/// The completion script for `shell`: clap_complete's, and for bash, zsh and fish a hook
/// that asks `gannet __complete next` first.
pub fn script(shell: Shell, cmd: &Command) -> String {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut offered(cmd), "gannet", &mut buf);
    let generated = String::from_utf8_lossy(&buf).into_owned();
    match shell {
        Shell::Bash => format!("{generated}\n{BASH_HOOK}"),
        // The hook becomes `_gannet`, the function zsh autoloads from this file, and clap's
        // is renamed: whether sourced or autoloaded, every completion goes through the hook.
        Shell::Zsh => {
            let renamed =
                generated.replacen("\n_gannet() {\n", "\n_gannet_commands_and_flags() {\n", 1);
            let (body, tail) = renamed
                .rsplit_once("if [ \"$funcstack[1]\" = \"_gannet\" ]; then")
                .unwrap_or((&renamed, ""));
            debug_assert!(!tail.is_empty(), "clap_complete's zsh script changed shape");
            format!("{body}{ZSH_HOOK}")
        }
        Shell::Fish => format!("{generated}\n{FISH_HOOK}"),
        _ => generated,
    }
}

/// What completion offers of `cmd` (the whole tree, unbuilt): its global flags and every
/// subcommand that is not hidden (clap_complete would offer `__complete` too).
fn offered(cmd: &Command) -> Command {
    Command::new("gannet")
        .version(env!("CARGO_PKG_VERSION"))
        .args(cmd.get_arguments().cloned())
        .subcommands(cmd.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

const BASH_HOOK: &str = r#"# App names and deployment ids, from the server (`gannet __complete`).
_gannet_with_names() {
    local cur="${COMP_WORDS[COMP_CWORD]}" names
    names="$("${COMP_WORDS[0]}" __complete next -- "${COMP_WORDS[@]:0:COMP_CWORD}" 2>/dev/null)"
    if [[ -n "$names" ]]; then
        COMPREPLY=($(compgen -W "$names" -- "$cur"))
        return 0
    fi
    _gannet "$@"
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _gannet_with_names -o nosort -o bashdefault -o default gannet
else
    complete -F _gannet_with_names -o bashdefault -o default gannet
fi
"#;

const ZSH_HOOK: &str = r#"# App names and deployment ids, from the server (`gannet __complete`).
_gannet() {
    local -a names
    names=(${(f)"$("${words[1]}" __complete next -- "${(@)words[1,CURRENT-1]}" 2>/dev/null)"})
    if (( ${#names} )); then
        compadd -a names
    else
        _gannet_commands_and_flags "$@"
    fi
}

if [ "$funcstack[1]" = "_gannet" ]; then
    _gannet "$@"
else
    compdef _gannet gannet
fi
"#;

const FISH_HOOK: &str = r#"# App names and deployment ids, from the server (`gannet __complete`).
function __fish_gannet_names
    set -l words (commandline -opc)
    $words[1] __complete next -- $words 2>/dev/null
end
complete -c gannet -f -n '__fish_gannet_names | string length -q' -a '(__fish_gannet_names)'
"#;

/// What the word after `words` (a command line, the program first) names: app names,
/// deployment ids or preview ids (an argument or a flag's value whose name is APP,
/// DEPLOYMENT or PREVIEW), or nothing. Read against `cmd`, the whole command tree, so flags
/// that take a value skip it.
pub fn next(cmd: &Command, words: &[String]) -> Option<Listed> {
    let mut chain: Vec<&Command> = vec![cmd];
    let mut positionals = 0;
    let mut value_of: Option<&Arg> = None;
    for word in words.iter().skip(1) {
        if value_of.take().is_some() {
            continue;
        }
        let current = *chain.last()?;
        if let Some(long) = word.strip_prefix("--") {
            if long.is_empty() || long.contains('=') {
                continue;
            }
            value_of = flag(&chain, |a| a.get_long() == Some(long));
        } else if let Some(short) = word.strip_prefix('-').filter(|s| !s.is_empty()) {
            // `-o` takes a value; `-ojson` holds it.
            let mut letters = short.chars();
            if let (Some(letter), None) = (letters.next(), letters.next()) {
                value_of = flag(&chain, |a| a.get_short() == Some(letter));
            }
        } else if let Some(sub) = current.find_subcommand(word) {
            chain.push(sub);
            positionals = 0;
        } else {
            positionals += 1;
        }
    }
    match value_of {
        Some(arg) => names(arg),
        None => chain
            .last()?
            .get_positionals()
            .nth(positionals)
            .and_then(names),
    }
}

/// The flag `matches` finds in a command of `chain` (innermost first), if it takes a value.
fn flag<'c>(chain: &[&'c Command], matches: impl Fn(&Arg) -> bool) -> Option<&'c Arg> {
    chain
        .iter()
        .rev()
        .find_map(|c| c.get_arguments().find(|a| matches(a)))
        .filter(|a| a.get_action().takes_values())
}

/// What `arg` names, by its value's name.
fn names(arg: &Arg) -> Option<Listed> {
    let name = arg
        .get_value_names()
        .and_then(|n| n.first())
        .map_or_else(|| arg.get_id().as_str().to_uppercase(), |n| n.to_string());
    match name.as_str() {
        "APP" => Some(Listed::Apps),
        "DEPLOYMENT" => Some(Listed::Deployments),
        "PREVIEW" => Some(Listed::Previews),
        _ => None,
    }
}

/// The value of flag `--long` in `words` (`--long VALUE` or `--long=VALUE`), the last given.
pub fn flag_value<'w>(words: &'w [String], long: &str) -> Option<&'w str> {
    let flag = format!("--{long}");
    let mut found = None;
    let mut words = words.iter();
    while let Some(word) = words.next() {
        if *word == flag {
            found = words.next().map(String::as_str);
        } else if let Some(value) = word.strip_prefix(&flag).and_then(|w| w.strip_prefix('=')) {
            found = Some(value);
        }
    }
    found
}

/// Prints what `gannet __complete` lists: app names, deployment ids, or (`next`) what the word
/// after `words` names, from the server `words` names with `--server` (or this one).
pub(crate) async fn list(server: &Server, what: Listed, words: &[String]) -> anyhow::Result<Exit> {
    let what = match what {
        Listed::Next => {
            let mut cli = Cli::command();
            cli.build();
            match next(&cli, words) {
                Some(listed) => listed,
                None => return Ok(Exit::Success),
            }
        }
        listed => listed,
    };
    let url = flag_value(words, "server").unwrap_or(&server.url);
    let token = match flag_value(words, "token").or(server.token.as_deref()) {
        Some(token) => Some(token.trim().to_owned()),
        None => client::token_from_env()?,
    };
    let client = Client::with_timeout(url, token, Duration::from_secs(3))?;
    let names: Vec<String> = match what {
        Listed::Deployments => client
            .deployments(None, &[], 50)
            .await?
            .into_iter()
            .map(|d| d.id.to_string())
            .collect(),
        Listed::Previews => client
            .previews(None, None, 50)
            .await?
            .into_iter()
            .map(|p| p.id.to_string())
            .collect(),
        Listed::Apps | Listed::Next => client.apps().await?.into_iter().map(|a| a.name).collect(),
    };
    for name in names {
        println!("{name}");
    }
    Ok(Exit::Success)
}
