//! The `notify` Lambda function (see the crate docs for what invokes it). It alone links the
//! EventBridge SDK, for the event bus.

fn main() -> std::process::ExitCode {
    gannet_functions::start_with(
        gannet_functions::Function::Notify,
        gannet_functions::Extras {
            bus: Some(gannet_functions::eventbridge_bus),
            ..Default::default()
        },
    )
}
