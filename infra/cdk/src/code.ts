import * as fs from 'node:fs';
import * as path from 'node:path';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { BundlingOptions, ICommandHooks, RustFunction } from 'cargo-lambda-cdk';
import { Construct } from 'constructs';
import { GannetPropError } from './settings';

/** The settings every gannet function shares with its SAM twin; the code is what differs. */
export interface GannetFunctionOptions extends lambda.FunctionOptions {
  readonly architecture: lambda.Architecture;
}

/**
 * Where the nine functions' code comes from: the zips of a release (no Rust toolchain needed)
 * or a cargo-lambda build of the gannet workspace at synth time.
 */
export abstract class FunctionCode {
  /**
   * Prebuilt zips laid out as `make console && cargo lambda build --release --arm64
   * --output-format zip -p gannet-functions --lambda-dir DIR` leaves them:
   * `DIR/<binary>/bootstrap.zip` for each of webhook, trigger, plan, stage, notify, poll,
   * resume, api and drift (`make console` bundles the web console the api binary embeds).
   */
  static fromZipDirectory(dir: string): FunctionCode {
    return new ZipDirectoryCode(path.resolve(dir));
  }

  /**
   * Builds each binary of the `gannet-functions` package with cargo-lambda-cdk's
   * `RustFunction` (arm64, release) from the workspace whose root `Cargo.toml` is at
   * `manifestPath` (a file, or the directory holding it). Needs cargo-lambda (and Zig) on the
   * machine that synthesises, or Docker. The api function's build first bundles the web
   * console it embeds (`scripts/console.sh build`, a no-op when the bundle is current; with
   * Node.js where it runs, so under Docker run `make console` in the workspace beforehand).
   */
  static fromCargoWorkspace(manifestPath: string, bundling?: BundlingOptions): FunctionCode {
    return new CargoWorkspaceCode(path.resolve(manifestPath), bundling);
  }

  /** Creates the function `id` running `binary`. @internal */
  abstract _createFunction(
    scope: Construct,
    id: string,
    binary: string,
    options: GannetFunctionOptions,
  ): lambda.Function;
}

class ZipDirectoryCode extends FunctionCode {
  constructor(private readonly dir: string) {
    super();
  }

  _createFunction(scope: Construct, id: string, binary: string, options: GannetFunctionOptions): lambda.Function {
    const zip = path.join(this.dir, binary, 'bootstrap.zip');
    if (!fs.existsSync(zip)) {
      throw new GannetPropError(
        'code',
        `no ${zip} (build with: make console && cargo lambda build --release --arm64 --output-format zip -p gannet-functions --lambda-dir ${this.dir})`,
      );
    }
    return new lambda.Function(scope, id, {
      ...options,
      runtime: lambda.Runtime.PROVIDED_AL2023,
      handler: 'bootstrap',
      code: lambda.Code.fromAsset(zip),
    });
  }
}

class CargoWorkspaceCode extends FunctionCode {
  constructor(
    private readonly manifestPath: string,
    private readonly bundling?: BundlingOptions,
  ) {
    super();
  }

  _createFunction(scope: Construct, id: string, binary: string, options: GannetFunctionOptions): lambda.Function {
    return new RustFunction(scope, id, {
      ...options,
      runtime: 'provided.al2023',
      manifestPath: this.manifestPath,
      binaryName: binary,
      bundling: {
        ...this.bundling,
        architecture: options.architecture,
        commandHooks: binary === 'api' ? consoleFirst(this.bundling?.commandHooks) : this.bundling?.commandHooks,
      },
    });
  }
}

/** `hooks`, with the web console's bundle built (or found current) before the api binary. */
function consoleFirst(hooks?: ICommandHooks): ICommandHooks {
  return {
    beforeBundling: (inputDir, outputDir) => [
      `bash "${inputDir}/scripts/console.sh" build`,
      ...(hooks?.beforeBundling(inputDir, outputDir) ?? []),
    ],
    afterBundling: (inputDir, outputDir) => hooks?.afterBundling(inputDir, outputDir) ?? [],
  };
}
