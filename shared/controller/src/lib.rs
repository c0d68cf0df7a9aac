//! gannet's handlers (webhook, trigger, plan, stage, resume, poll, api), generic over the ports.
